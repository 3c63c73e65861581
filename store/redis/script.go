package redis

import (
	"context"

	"github.com/sluicehq/sluice/internal/ctxend"
	"github.com/sluicehq/sluice/store"
)

// maxResends bounds how often one call is sent again after a reply proving
// it did not run: NOSCRIPT, then a redirect, then NOSCRIPT on the new node,
// then one more redirect (a slot that moved again).
const maxResends = 4

// RunScript runs s on key with args in one round trip (store.ScriptRunner):
// EVALSHA with s.Hash, and EVAL with s.Source when the server has lost the
// script (NOSCRIPT: after a restart, a failover or SCRIPT FLUSH), so a
// NOSCRIPT never reaches the caller. ARGV follows store.ScriptArgs; the
// reply must be six integers.
//
// A command is sent again only after a reply proving it did not run
// (NOSCRIPT, and on a cluster MOVED and ASK). Every error matches
// core.ErrUnavailable; one after which the script may have run (a timeout
// or a broken connection once the command was sent, an error a script
// raised after a write) also matches core.ErrOutcomeUnknown. A command
// known not to have run does not: never sent (a dial, a pool wait), or
// refused before the script's first write (OOM, READONLY, MISCONF,
// NOREPLICAS; see the package doc's Errors). RunScript returns by ctx's
// deadline, and at its cancellation: with a bare context error when ctx
// had ended before the call, and otherwise with an unknown outcome, as
// go-redis cannot tell whether it had written the command (a dial that
// was still under way counts too).
func (s *Store) RunScript(ctx context.Context, sc *store.Script, key store.Key, args store.ScriptArgs) (store.ScriptResult, error) {
	if err := s.ready("script"); err != nil {
		return store.ScriptResult{}, err
	}
	if sc == nil {
		return store.ScriptResult{}, &store.Error{Op: "script", Err: errNilScript}
	}
	if err := sc.CheckArgs(&args); err != nil {
		return store.ScriptResult{}, &store.Error{Op: "script", Err: err}
	}
	if err := ctx.Err(); err != nil {
		return store.ScriptResult{}, &store.Error{Op: "script", Err: err} // nothing was sent
	}
	c := getCall(sc, key, args)
	if ctxend.Early(ctx) {
		// go-redis sees only ctx's deadline: the call goes on in a
		// goroutine of its own, and the caller returns at a cancellation.
		r, err, ended := ctxend.Run(ctx, func() (store.ScriptResult, error) { return s.run(ctx, sc, c) })
		if ended {
			return r, &store.Error{Op: "script", Err: store.UnknownOutcome(ctx.Err())}
		}
		return r, err
	}
	return s.run(ctx, sc, c)
}

// run sends c, the call of sc, and reads its reply (see RunScript). c is
// run's: it goes back to the pool here, unless a batch still holds it.
func (s *Store) run(ctx context.Context, sc *store.Script, c *call) (store.ScriptResult, error) {
	var err error
	if b := s.batcherFor(ctx, c.key); b != nil {
		var held bool
		if err, held = b.do(ctx, c); held {
			return store.ScriptResult{}, err // already a store error
		}
	} else {
		err = s.client.Process(ctx, c.cmd)
	}
	for i := 0; err != nil && i < maxResends; i++ {
		if isNoScript(err) && c.argv[0] == "evalsha" {
			c.eval(sc)
			err = s.client.Process(ctx, c.cmd)
			continue
		}
		resent, rerr := s.redirect(ctx, c.cmd, err)
		err = rerr // when not resent: err, or why its redirect was not followed
		if !resent {
			break
		}
	}
	if err != nil {
		s.reloadAfter(err)
		putCall(c)
		return store.ScriptResult{}, storeError("script", err)
	}
	r, err := c.result()
	putCall(c)
	if err != nil {
		return r, storeError("script", err)
	}
	return r, nil
}
