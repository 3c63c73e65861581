package valkey

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/sluicehq/sluice/internal/ctxend"
	"github.com/sluicehq/sluice/internal/inflight"
)

// shared carries the commands that do not go down one of the store's
// dedicated connections (see direct): those beyond them, the batches, and
// the generic path's reads and writes. Each call leaves at its own
// deadline, even while a connection is dialled.
//
// valkey-go dials its broken shared connection again inside the next
// command that needs it, on that command's goroutine, and waits for the
// new connection's handshake (HELLO) for its dialer's timeout, 5 s by
// default, whatever the command's context says (commands arriving
// meanwhile wait for the same dial): against a server that accepts
// connections and answers nothing (hung, or behind a proxy that lost it),
// calls took 5 s under a Timeout of 100 ms. Which command meets the dial
// cannot be known: any one may be the first after the connection broke.
// So a standalone client's commands ride pipelined connections of the
// store's own instead (dedicated ones that many callers share, as
// valkey-go's shared connections are shared: as many, sharedPipes, each
// command on one at random), made and replaced in the background and
// never in a call; while there is none (they broke and their replacements
// are on their way), and always for a sentinel or cluster client (whose
// connections follow failovers and slots), a command runs on a goroutine
// of its own, which the caller leaves when its context ends; one left
// behind ends with the dial. (A goroutine for every command measured 7%
// slower at 16 goroutines.)
type shared struct {
	c   valkeygo.Client
	own bool // the client is standalone: commands ride pipes

	pipes  []atomic.Pointer[lane] // a nil one is being made
	making atomic.Bool
	// onLost, when set, hears that a pipelined connection broke (direct
	// drops its idle dedicated connections then, as they died with it).
	onLost func()

	mu     sync.Mutex
	closed bool
	stop   chan struct{} // closed by close
	drops  dropper
}

// sharedPipes is how many pipelined connections a standalone store keeps:
// as many as valkey-go's shared ones by default (its PipelineMultiplex), 2
// at 2 cores and 4 from 4 on, but 2 at 1 core too, where valkey-go keeps
// one. Measured at 2 cores, one was 12% slower at 16 goroutines than
// valkey-go's two, and 25% at 64.
func sharedPipes() int {
	if runtime.GOMAXPROCS(0) >= 4 {
		return 4
	}
	return 2
}

func newShared(c valkeygo.Client) *shared {
	sh := &shared{c: c, stop: make(chan struct{})}
	if c.Mode() == valkeygo.ClientModeStandalone {
		sh.own = true
		sh.pipes = make([]atomic.Pointer[lane], sharedPipes())
		sh.remake()
	}
	return sh
}

// pipe returns one of the pipelined connections, at random, or nil when
// none is up. Finding one missing, it starts the maker (which may have
// given up after a failed dial).
func (sh *shared) pipe() (*atomic.Pointer[lane], *lane) {
	n := len(sh.pipes)
	if n == 0 {
		return nil, nil
	}
	i := rand.IntN(n)
	if sh.pipes[i].Load() == nil {
		sh.remake()
	}
	for range n {
		if l := sh.pipes[i].Load(); l != nil {
			return &sh.pipes[i], l
		}
		if i++; i == n {
			i = 0
		}
	}
	return nil, nil
}

// Do sends cmd under ctx (see onPipeline): on the store's pipelined
// connection when there is one, and otherwise on valkey-go's shared one,
// from a goroutine that the caller leaves when ctx ends.
func (sh *shared) Do(ctx context.Context, cmd valkeygo.Completed) valkeygo.ValkeyResult {
	if at, l := sh.pipe(); l != nil {
		resp := l.dc.Do(onPipeline(ctx), cmd)
		sh.check(ctx, at, l, resp.NonValkeyError())
		return resp
	}
	return apart(ctx, func(ctx context.Context) valkeygo.ValkeyResult { return sh.c.Do(ctx, cmd) })
}

// DoMulti sends cmds under ctx, for a batch, whose callers wait for it or
// for their own contexts (internal/batch): it runs on the batcher's
// goroutine, never a caller's, and needs no goroutine of its own.
func (sh *shared) DoMulti(ctx context.Context, cmds ...valkeygo.Completed) []valkeygo.ValkeyResult {
	if at, l := sh.pipe(); l != nil {
		resps := l.dc.DoMulti(onPipeline(ctx), cmds...)
		for _, r := range resps {
			if err := r.NonValkeyError(); err != nil {
				sh.check(ctx, at, l, err)
				break
			}
		}
		return resps
	}
	return sh.c.DoMulti(onPipeline(ctx), cmds...)
}

// check replaces l, held at at, when err, a command's error on it, is the
// connection's and not ctx's end (valkey-go leaves a pipelined connection
// up when a caller leaves it).
func (sh *shared) check(ctx context.Context, at *atomic.Pointer[lane], l *lane, err error) {
	if !broke(ctx, err) || !at.CompareAndSwap(l, nil) {
		return
	}
	sh.drops.drop(l)
	sh.lost()
	if sh.onLost != nil {
		sh.onLost()
	}
}

// lost drops every pipelined connection, for the maker to dial again: one
// of the store's connections broke, and the server most likely went away
// (see direct.put).
func (sh *shared) lost() {
	for i := range sh.pipes {
		if l := sh.pipes[i].Swap(nil); l != nil {
			sh.drops.drop(l)
		}
	}
	sh.remake()
}

// broke reports whether err, a command's error under ctx, says that its
// connection broke, rather than that ctx ended (valkey-go reports a socket
// deadline it set from ctx as context.DeadlineExceeded, which may come an
// instant before ctx's own end).
func broke(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// dropper gives connections back to the client, each on a goroutine of
// its own, and waits for them at the store's Close. Giving one back closes
// it first (the client discards a closed connection; the commands still on
// it fail, as on a broken one): valkey-go's Close waits up to a second for
// a silent server, and giving back a connection still open waits for the
// server to answer its cleanup, 12 s for a silent one. So no caller waits
// on the server for a connection it gives back, and Close waits about a
// second at most, for all at once.
//
// A lane may come back after Close waited (a call that held it returns
// later): it is dropped the same way, and its goroutine ends within that
// second.
type dropper struct{ inflight.Counter }

func (p *dropper) drop(l *lane) {
	p.Add()
	go func() {
		defer p.Done()
		l.dc.Close()
		l.release()
	}()
}

func (p *dropper) wait() { p.Wait() }

// remake starts the maker of the pipelined connections unless it runs, or
// the client is not standalone.
func (sh *shared) remake() {
	if !sh.own || !sh.making.CompareAndSwap(false, true) {
		return
	}
	go sh.make()
}

// make dials every pipelined connection that is missing and checks each
// with a PING; at one that fails it stops and, after retryAfterDial, the
// next command that finds one missing starts it again.
func (sh *shared) make() {
	defer sh.making.Store(false)
	for i := range sh.pipes {
		if sh.pipes[i].Load() != nil {
			continue
		}
		l, ok := dialLane(sh.c, sh.stop)
		if !ok {
			return
		}
		sh.mu.Lock()
		if sh.closed {
			sh.mu.Unlock()
			l.release()
			return
		}
		sh.pipes[i].Store(l)
		sh.mu.Unlock()
	}
}

// close gives the pipelined connections back to the client (sh.drops,
// which the store's Close waits for), and stops the maker.
func (sh *shared) close() {
	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		return
	}
	sh.closed = true
	close(sh.stop)
	for i := range sh.pipes {
		if l := sh.pipes[i].Swap(nil); l != nil {
			sh.drops.drop(l)
		}
	}
	sh.mu.Unlock()
}

// apartCall is a command's reply on its way from apart's goroutine.
type apartCall struct {
	resp valkeygo.ValkeyResult
	done chan struct{}
}

var apartPool = sync.Pool{New: func() any { return &apartCall{done: make(chan struct{}, 1)} }}

// uncancelled returns ctx as the command of a caller who may leave sends
// it: ended by ctx's deadline, not by its cancellation. valkey-go dials a
// shared connection it lacks under the context of the command that needs
// it first, and fails every command waiting on that dial when that context
// ends; a caller who cancels must not fail the others (it leaves at once
// all the same: see apart). The context of a caller who cannot cancel is
// ctx itself.
func uncancelled(ctx context.Context) (context.Context, context.CancelFunc) {
	if !ctxend.Early(ctx) {
		return ctx, func() {}
	}
	dl, ok := ctx.Deadline()
	ctx = context.WithoutCancel(ctx)
	if !ok {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, dl)
}

// apart runs do on a goroutine of its own and returns its reply, or ctx's
// error when ctx ends first (an unknown outcome: valkey-go may have sent
// the command).
func apart(ctx context.Context, do func(context.Context) valkeygo.ValkeyResult) valkeygo.ValkeyResult {
	if err := ctx.Err(); err != nil {
		return valkeygo.NewErrorResult(err)
	}
	a := apartPool.Get().(*apartCall)
	go func() {
		ctx, cancel := uncancelled(ctx)
		a.resp = do(onPipeline(ctx))
		cancel()
		a.done <- struct{}{}
	}()
	select {
	case <-a.done:
		resp := a.resp
		a.resp = valkeygo.ValkeyResult{}
		apartPool.Put(a)
		return resp
	case <-ctx.Done():
		return valkeygo.NewErrorResult(ctx.Err()) // a stays with its goroutine
	}
}
