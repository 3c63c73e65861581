package valkey

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/store"
	valkeygo "github.com/valkey-io/valkey-go"
)

// RunScript runs sc, an algorithm's Lua twin, on key with the ScriptArgs
// convention, in one round trip: EVALSHA, and EVAL only when the server
// answers NOSCRIPT (after a restart, a failover or SCRIPT FLUSH), which
// means the script did not run. With args.Now == 0 the script reads the
// server's TIME.
//
// The command is sent once. A reply lost after it went out (a deadline, a
// cancelled context, a broken connection) gives an error matching
// core.ErrOutcomeUnknown: the script may have run, and it is not sent
// again. Every error is a *store.Error matching core.ErrUnavailable.
// RunScript is safe for concurrent use; a few concurrent calls each take a
// dedicated connection, more share the client's pipeline, and many go on it
// in batches (see the package doc).
func (s *Store) RunScript(ctx context.Context, sc *store.Script, key store.Key, args store.ScriptArgs) (store.ScriptResult, error) {
	if err := s.ready(ctx, "script"); err != nil {
		return store.ScriptResult{}, err
	}
	if sc == nil {
		return store.ScriptResult{}, &store.Error{Op: "script", Err: errNoScript}
	}
	if err := sc.CheckArgs(&args); err != nil {
		return store.ScriptResult{}, &store.Error{Op: "script", Err: err}
	}
	k := key.String()
	var buf [store.NumScriptArgs]string
	argv := s.args.argv(sc, &args, buf[:0])
	resp, err := s.send(ctx, s.c.B().Evalsha().Sha1(sc.Hash).Numkeys(1).Key(k).Arg(argv...).Build())
	if err == nil && isNoScript(resp.Error()) {
		resp, err = s.send(ctx, s.c.B().Eval().Script(sc.Source).Numkeys(1).Key(k).Arg(argv...).Build())
	}
	if err != nil {
		return store.ScriptResult{}, err
	}
	return scriptResult(sc, &args, resp)
}

func isNoScript(err error) bool {
	verr, ok := valkeygo.IsValkeyErr(err)
	return ok && verr.IsNoScript()
}

var (
	errReply    = errors.New("sluice/valkey: script reply is not six integers")
	errNoScript = errors.New("sluice/valkey: nil script")
)

// scriptResult reads a script's reply: six integers, or one that sc
// decodes.
func scriptResult(sc *store.Script, a *store.ScriptArgs, resp valkeygo.ValkeyResult) (store.ScriptResult, error) {
	var buf [len(store.ScriptResult{})]int64
	ints := buf[:0]
	if n, err := resp.AsInt64(); err == nil {
		ints = append(ints, n)
	} else {
		vs, err := resp.ToArray()
		if err != nil {
			return store.ScriptResult{}, storeError("script", err, true)
		}
		if len(vs) > len(buf) {
			return store.ScriptResult{}, replyError(fmt.Errorf("%w: got %d values", errReply, len(vs)))
		}
		for i := range vs {
			n, err := vs[i].ToInt64()
			if err != nil {
				return store.ScriptResult{}, replyError(fmt.Errorf("%w: value %d: %w", errReply, i+1, err))
			}
			ints = append(ints, n)
		}
	}
	r, err := sc.Result(ints, a)
	if err != nil {
		return r, replyError(fmt.Errorf("%w: got %d values", errReply, len(ints)))
	}
	return r, nil
}

// replyError is a reply of the wrong shape: the script ran and may have
// changed state, but its decision is lost.
func replyError(err error) error {
	return &store.Error{Op: "script", Err: store.UnknownOutcome(err)}
}
