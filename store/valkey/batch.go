package valkey

import (
	"context"
	"sync"

	"github.com/sluicehq/sluice/internal/batch"
	"github.com/sluicehq/sluice/store"
	valkeygo "github.com/valkey-io/valkey-go"
)

// batcher coalesces the commands that share a standalone client's pipeline
// into DoMulti batches (internal/batch). valkey-go's writer flushes its
// connection whenever it finds no command waiting, so many callers each
// sending one command made it flush once or twice a command: at 64
// goroutines, write syscalls were 73% of the client's CPU, on cores it
// shares with the server. A batch goes into the pipeline as one write.
//
// A command that finds a lane free goes alone, at once, from its caller's
// goroutine (valkey-go's pipeline still carries it beside the others); the
// ones that queue behind busy lanes go as one DoMulti. A command runs at
// most once, alone or in the one batch that took it.
type batcher struct {
	b *batch.Batcher[vcall]
}

// vcall is one command on its way through the batcher. Calls are pooled.
type vcall struct {
	bc   batch.Call
	cmd  valkeygo.Completed
	resp valkeygo.ValkeyResult
}

var vcallPool = sync.Pool{New: func() any { return &vcall{bc: batch.NewCall()} }}

// cmdsPool holds the command slices of batches.
var cmdsPool = sync.Pool{New: func() any { s := make([]valkeygo.Completed, 0, batchMax); return &s }}

// batchLanes is how many commands or batches the batcher keeps in flight
// on the pipeline; batchMax is the most commands one batch carries.
const (
	batchLanes = 2
	batchMax   = 64
)

func newBatcher(sh *shared) *batcher {
	one := func(ctx context.Context, v *vcall) { v.resp = sh.Do(ctx, v.cmd) }
	many := func(ctx context.Context, vs []*vcall) {
		if len(vs) == 1 {
			one(ctx, vs[0])
			return
		}
		p := cmdsPool.Get().(*[]valkeygo.Completed)
		cmds := (*p)[:0]
		for _, v := range vs {
			cmds = append(cmds, v.cmd)
		}
		done := true
		for i, resp := range sh.DoMulti(ctx, cmds...) {
			vs[i].resp = resp
			done = done && resp.NonValkeyError() == nil
		}
		if !done {
			// DoMulti returned at ctx's end or a broken connection, and
			// valkey-go's writer may still hold cmds, the slice itself,
			// in its queue: clearing it for the next batch would hand the
			// writer empty commands (a nil dereference in valkey-go). The
			// slice is left to it, and to the collector.
			return
		}
		clear(cmds)
		*p = cmds
		cmdsPool.Put(p)
	}
	return &batcher{batch.New(batchLanes, batchMax, func(v *vcall) *batch.Call { return &v.bc }, one, many)}
}

// do sends cmd and returns its reply. A non-nil error is the batcher's own:
// ctx ended while cmd waited, before a batch took it (nothing was sent) or
// after (an unknown outcome).
func (b *batcher) do(ctx context.Context, cmd valkeygo.Completed) (valkeygo.ValkeyResult, error) {
	v := vcallPool.Get().(*vcall)
	v.cmd = cmd
	switch b.b.Do(ctx, v) {
	case batch.Sent:
		resp := v.resp
		v.cmd, v.resp = valkeygo.Completed{}, valkeygo.ValkeyResult{}
		v.bc.Reset()
		vcallPool.Put(v)
		return resp, nil
	case batch.NotSent: // v is left to the collector: the queue may still hold it
		return valkeygo.ValkeyResult{}, &store.Error{Op: "script", Err: ctx.Err()}
	default:
		return valkeygo.ValkeyResult{}, &store.Error{Op: "script", Err: store.UnknownOutcome(ctx.Err())}
	}
}
