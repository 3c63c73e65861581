package valkey

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/casscript"
	"github.com/sluicehq/sluice/store"
	valkeygo "github.com/valkey-io/valkey-go"
)

// Update applies m to key's state atomically, for algorithms without a Lua
// twin (or limiters with Config.NoScript): GET, m.Apply, then a
// compare-and-set (the store's own small script, or SET NX for an absent
// key; a key of another type reads as absent and a script of its own
// replaces it), retried on a conflict by store.CASUpdate within
// Options.Retry. The key's TTL is the algorithm's, plus Options.ClockSkew.
//
// Errors are *store.Error matching core.ErrUnavailable: a network error
// or deadline (matching core.ErrOutcomeUnknown too when it came after a
// compare-and-set was sent), or a *store.ContentionError when every attempt
// lost a race. Update is safe for concurrent use.
func (s *Store) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	if err := s.ready(ctx, "update"); err != nil {
		return err
	}
	if m == nil {
		return &store.Error{Op: "update", Err: errNoMutation}
	}
	_, err := store.CASUpdate(ctx, (*casBackend)(s), key.String(), m, s.retry)
	if err != nil {
		var se *store.Error
		if !errors.As(err, &se) {
			err = &store.Error{Op: "update", Err: err}
		}
	}
	return err
}

var errNoMutation = errors.New("sluice/valkey: nil mutation")

// casBackend gives store.CASUpdate the store's Load and Swap without adding
// them to Store's method set.
type casBackend Store

// Load reads key with GET. The token is the state as read, which the swap
// compares byte for byte. valkey-go may retry a GET after a network error;
// a read can be repeated safely.
func (b *casBackend) Load(ctx context.Context, key string) ([]byte, any, error) {
	resp := b.sh.Do(ctx, b.c.B().Get().Key(key).Build())
	v, err := resp.ToString()
	switch {
	case valkeygo.IsValkeyNil(err):
		return nil, nil, nil
	case isWrongType(err):
		// A key of another type is not an algorithm's state: it reads as
		// absent, as undecodable state does, and the swap replaces it.
		return nil, casscript.ForeignKey{}, nil
	case err != nil:
		return nil, nil, storeError("update", err, false)
	}
	// Apply may write into the state's array: give it a copy of its own.
	return []byte(v), v, nil
}

// Swap writes next if key still holds token (or, for a nil token, is still
// absent). It is sent once: valkey-go never retries a write.
func (b *casBackend) Swap(ctx context.Context, key string, token any, next []byte, ttl time.Duration) (bool, error) {
	ms := casscript.PXMillis(ttl + b.skew)
	c, sh := b.c, b.sh
	if token == nil {
		resp := sh.Do(ctx, c.B().Set().Key(key).Value(string(next)).Nx().PxMilliseconds(ms).Build())
		if err := resp.Error(); err != nil {
			if valkeygo.IsValkeyNil(err) { // NX refused: someone created it first
				return false, nil
			}
			return false, storeError("update", err, true)
		}
		return true, nil
	}
	sc, argv := casscript.Swap, [3]string{"", string(next), strconv.FormatInt(ms, 10)}
	args := argv[:]
	if _, ok := token.(casscript.ForeignKey); ok {
		sc, args = casscript.Foreign, argv[1:]
	} else {
		argv[0], _ = token.(string)
	}
	resp := sh.Do(ctx, c.B().Evalsha().Sha1(sc.Hash).Numkeys(1).Key(key).Arg(args...).Build())
	if isNoScript(resp.Error()) {
		resp = sh.Do(ctx, c.B().Eval().Script(sc.Source).Numkeys(1).Key(key).Arg(args...).Build())
	}
	n, err := resp.ToInt64()
	if err != nil {
		return false, storeError("update", err, true)
	}
	return n == 1, nil
}

// isWrongType reports a WRONGTYPE reply: the command met a key of another
// type.
func isWrongType(err error) bool {
	verr, ok := valkeygo.IsValkeyErr(err)
	return ok && strings.HasPrefix(verr.Error(), "WRONGTYPE")
}

// ClockSkew is Options.ClockSkew as New filled it in (store.ClockSkewer):
// the generic path's TTL allowance for the fleet's clocks. A Limiter on the
// generic path clamps a stored time that lies more than this ahead of its
// own clock; scripts read the server's clock and need none.
func (s *Store) ClockSkew() time.Duration { return s.skew }
