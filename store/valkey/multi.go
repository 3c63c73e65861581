package valkey

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/store"
)

var _ store.MultiScriptRunner = (*Store)(nil)

var errMultiKeys = errors.New("sluice/valkey: a multi-limit script needs at least one key")

// RunMultiScript runs s over keys, every one of one identity (they share
// its hash tag, so one slot of a cluster), in one EVALSHA (EVAL after
// NOSCRIPT), and appends the script's integers to reply. A deadline after
// the script was sent is an unknown outcome, never re-sent.
func (s *Store) RunMultiScript(ctx context.Context, sc *store.Script, keys []store.Key, args []int64, reply []int64) ([]int64, error) {
	if err := s.ready(ctx, "script"); err != nil {
		return reply, err
	}
	if sc == nil {
		return reply, &store.Error{Op: "script", Err: errNoScript}
	}
	if len(keys) == 0 {
		return reply, &store.Error{Op: "script", Err: errMultiKeys}
	}
	ks := make([]string, len(keys))
	for i, k := range keys {
		ks[i] = k.String()
	}
	argv := make([]string, len(args))
	for i, v := range args {
		argv[i] = strconv.FormatInt(v, 10)
	}
	resp, err := s.send(ctx, s.c.B().Evalsha().Sha1(sc.Hash).Numkeys(int64(len(ks))).Key(ks...).Arg(argv...).Build())
	if err == nil && isNoScript(resp.Error()) {
		resp, err = s.send(ctx, s.c.B().Eval().Script(sc.Source).Numkeys(int64(len(ks))).Key(ks...).Arg(argv...).Build())
	}
	if err != nil {
		return reply, err
	}
	vs, err := resp.ToArray()
	if err != nil {
		return reply, storeError("script", err, true)
	}
	if len(vs) == 0 {
		return reply, &store.Error{Op: "script", Err: store.UnknownOutcome(errors.New("sluice/valkey: multi-limit script replied no integers"))}
	}
	for i := range vs {
		n, err := vs[i].ToInt64()
		if err != nil {
			return reply, &store.Error{Op: "script", Err: store.UnknownOutcome(fmt.Errorf("%w: value %d: %w", errReply, i+1, err))}
		}
		reply = append(reply, n)
	}
	return reply, nil
}
