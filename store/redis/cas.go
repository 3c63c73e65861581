package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/casscript"
	"github.com/sluicehq/sluice/store"
)

// Update applies m to key's state atomically (store.Store): GET, m.Apply,
// then a compare-and-set (SET NX for an absent key, casscript.Foreign for a
// key of another type, which reads as absent; casscript.Swap otherwise),
// looped by store.CASUpdate with Options.Retry until a swap wins. The
// compare is on the whole value, so any write in between makes the swap
// lose. The key's TTL is the algorithm's plus Options.ClockSkew.
//
// Errors match core.ErrUnavailable: a failed GET (nothing was written), a
// failed swap (also core.ErrOutcomeUnknown unless the failure proves the
// swap did not run; a swap is never sent twice), too many lost swaps
// (core.ErrContention), or ctx's end.
//
// Unlike RunScript, Update does not return at ctx's cancellation before
// the round trip under way ends (by ctx's deadline at the latest): the
// mutation it applies between the GET and the swap is its caller's, which
// a call abandoned on a goroutine would go on using after it returned.
func (s *Store) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	if err := s.ready("update"); err != nil {
		return err
	}
	if m == nil {
		return &store.Error{Op: "update", Err: errNilMutation}
	}
	_, err := store.CASUpdate(ctx, casBackend{s}, key.String(), m, s.opts.Retry)
	if err == nil {
		return nil
	}
	if se := (*store.Error)(nil); errors.As(err, &se) {
		return err // from Load or Swap, already classified
	}
	return &store.Error{Op: "update", Err: err} // contention, ctx
}

// casBackend gives store.CASUpdate its Load and Swap. The token is the value
// read, as a string (immutable, so Apply may reuse the state's bytes), or
// nil for an absent key.
type casBackend struct{ s *Store }

func (b casBackend) Load(ctx context.Context, key string) ([]byte, any, error) {
	cmd := goredis.NewStringCmd(ctx, "get", key)
	err := b.s.process(ctx, cmd)
	if err == goredis.Nil {
		return nil, nil, nil
	}
	if isWrongType(err) {
		// A key of another type is not an algorithm's state: it reads as
		// absent, as undecodable state does, and the swap replaces it.
		return nil, casscript.ForeignKey{}, nil
	}
	if err != nil {
		// A read changes nothing: the outcome is known.
		return nil, nil, &store.Error{Op: "update", Err: err}
	}
	v := cmd.Val()
	return []byte(v), v, nil
}

func (b casBackend) Swap(ctx context.Context, key string, token any, next []byte, ttl time.Duration) (bool, error) {
	ms := casscript.PXMillis(ttl + b.s.opts.ClockSkew)
	if _, ok := token.(casscript.ForeignKey); ok {
		return b.swapScript(ctx, casscript.Foreign, []any{"evalsha", casscript.Foreign.Hash, "1", key, next, ms})
	}
	old, present := token.(string)
	if !present {
		cmd := goredis.NewStatusCmd(ctx, "set", key, next, "px", ms, "nx")
		err := b.s.process(ctx, cmd)
		if err == goredis.Nil {
			return false, nil
		}
		if err != nil {
			return false, storeError("update", err)
		}
		return true, nil
	}
	return b.swapScript(ctx, casscript.Swap, []any{"evalsha", casscript.Swap.Hash, "1", key, old, next, ms})
}

// swapScript sends args, an EVALSHA of sc (casscript.Swap or
// casscript.Foreign), as an EVAL of its source if the server does not hold
// it, and reports whether it wrote.
func (b casBackend) swapScript(ctx context.Context, sc *store.Script, args []any) (bool, error) {
	cmd := goredis.NewIntCmd(ctx, args...)
	err := b.s.process(ctx, cmd)
	if isNoScript(err) {
		args[0], args[1] = "eval", sc.Source
		cmd = goredis.NewIntCmd(ctx, args...)
		err = b.s.process(ctx, cmd)
	}
	if err != nil {
		return false, storeError("update", err)
	}
	return cmd.Val() == 1, nil
}

// isWrongType reports a WRONGTYPE reply: the command met a key of another
// type.
func isWrongType(err error) bool { return goredis.HasErrorPrefix(err, "WRONGTYPE") }

// ClockSkew is Options.ClockSkew, as filled in by New (store.ClockSkewer):
// the generic path's allowance for the fleet's clocks. A Limiter on the
// generic path clamps a stored time that lies more than this ahead of its
// own clock; scripts read the server's clock and need none.
func (s *Store) ClockSkew() time.Duration { return s.opts.ClockSkew }
