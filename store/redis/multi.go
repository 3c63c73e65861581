package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/ctxend"
	"github.com/sluicehq/sluice/store"
)

var _ store.MultiScriptRunner = (*Store)(nil)

var errMultiKeys = errors.New("sluice/redis: a multi-limit script needs at least one key")

// multiArgs is the argument list of one multi-key script call, pooled. The
// integers are passed as pointers into vals, which go-redis writes as
// their values, so that building the command boxes nothing.
type multiArgs struct {
	argv []any
	vals []int64
}

var multiArgsPool = sync.Pool{New: func() any { return new(multiArgs) }}

// RunMultiScript runs s over keys, every one of one identity (they share
// its hash tag, so one slot of a cluster), in one EVALSHA (EVAL after
// NOSCRIPT), and appends the script's integers to reply. It follows MOVED
// and ASK, which prove the script did not run, and never re-sends one
// whose outcome is unknown. It does not go through the batcher: the call
// is one round trip of its own.
func (s *Store) RunMultiScript(ctx context.Context, sc *store.Script, keys []store.Key, args []int64, reply []int64) ([]int64, error) {
	if err := s.ready("script"); err != nil {
		return reply, err
	}
	switch {
	case sc == nil:
		return reply, &store.Error{Op: "script", Err: errNilScript}
	case len(keys) == 0:
		return reply, &store.Error{Op: "script", Err: errMultiKeys}
	}
	if err := ctx.Err(); err != nil {
		return reply, &store.Error{Op: "script", Err: err} // nothing was sent
	}
	// The command is built from copies of keys and args, so that the
	// round trip holds nothing of the caller's: it may run on past a
	// cancellation (see RunScript).
	a := multiArgsPool.Get().(*multiArgs)
	a.argv = append(a.argv[:0], "evalsha", sc.Hash, len(keys))
	for _, k := range keys {
		a.argv = append(a.argv, k.String())
	}
	a.vals = append(a.vals[:0], args...)
	for i := range a.vals {
		a.argv = append(a.argv, &a.vals[i])
	}
	if !ctxend.Early(ctx) {
		v, err := s.runMulti(ctx, sc, a)
		if err != nil {
			return reply, err
		}
		return append(reply, v...), nil
	}
	v, err, ended := ctxend.Run(ctx, func() ([]int64, error) { return s.runMulti(ctx, sc, a) })
	switch {
	case ended:
		return reply, &store.Error{Op: "script", Err: store.UnknownOutcome(ctx.Err())}
	case err != nil:
		return reply, err
	}
	return append(reply, v...), nil
}

// runMulti sends the multi-limit script of argv a and returns its
// integers; a goes back to the pool here.
func (s *Store) runMulti(ctx context.Context, sc *store.Script, a *multiArgs) ([]int64, error) {
	defer func() {
		clear(a.argv)
		a.argv = a.argv[:0]
		multiArgsPool.Put(a)
	}()
	cmd := goredis.NewIntSliceCmd(ctx, a.argv...)
	err := s.process(ctx, cmd)
	if err != nil && isNoScript(err) {
		a.argv[0], a.argv[1] = "eval", sc.Source
		cmd = goredis.NewIntSliceCmd(ctx, a.argv...)
		err = s.process(ctx, cmd)
	}
	if err != nil {
		return nil, storeError("script", err)
	}
	v, err := cmd.Result()
	if err != nil {
		return nil, storeError("script", err)
	}
	if len(v) == 0 {
		return nil, &store.Error{Op: "script", Err: store.UnknownOutcome(fmt.Errorf("sluice/redis: multi-limit script replied no integers"))}
	}
	return v, nil
}
