package valkey

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/sluicehq/sluice/internal/ctxend"
)

// direct routes a standalone client's commands by how many the store has
// in flight. valkey-go's shared connection pipelines concurrent commands
// through a writer and a reader goroutine of its own, which is the fastest
// way to carry many; but a few callers then pay two goroutine handoffs a
// command, and were measured at 0.6–0.9 of go-redis's pooled connections
// at 4 goroutines. So while at most lanes commands are in flight, a
// command goes down a dedicated connection of the store's own instead, and
// the caller writes and reads its socket itself (valkey-go's synchronous
// path); beyond that, it joins the pipeline (see shared), and from
// batchFrom in flight it waits for a batch there (see batcher).
//
// The dedicated connections are the client's (Client.Dedicate), made and
// replaced by one goroutine in the background, never by a caller: a
// decision never waits for a dial, which ignores its deadline. A call finds
// a free one or takes the pipeline. A connection whose command failed with
// anything but a server's error reply is given back to the client (which
// discards a broken one) and replaced. Each command is still sent once:
// neither path resends a script (see the package doc).
type direct struct {
	c     valkeygo.Client
	sh    *shared  // c's shared connection
	b     *batcher // the pipeline in batches, for commands beyond batchFrom
	lanes int32
	// batchFrom is how many commands in flight make the next one join a
	// batch (see batcher) rather than the pipeline on its own.
	batchFrom int32

	inflight atomic.Int32
	free     chan *lane // the idle dedicated connections
	making   atomic.Bool

	mu     sync.Mutex
	made   int // dedicated connections held, idle or in use
	closed bool
	stop   chan struct{} // closed by close
	drops  dropper
}

// lane is one dedicated connection and the function that gives it back.
type lane struct {
	dc      valkeygo.DedicatedClient
	release func()
}

// directLanes is how many commands go down dedicated connections before
// the rest share the pipeline: 2 × GOMAXPROCS, at least 2, as many as the
// go-redis store's batcher keeps round trips in flight. Measured at 2
// cores: at 4 goroutines dedicated connections are 1.2–1.5× the pipeline,
// at 16 the pipeline is 1.3–1.6× them.
func directLanes() int32 { return int32(max(2, 2*runtime.GOMAXPROCS(0))) }

// batchFrom is how many commands in flight, for lanes dedicated
// connections, make the next one join a batch: 8 × lanes, 32 at 2 cores.
// Measured at 2 cores against raw valkey-go's pipeline at 16, 64 and 256
// goroutines: batching from 32 in flight was 0.88–1.09, 1.09–1.24 and
// 1.32–1.67 of it; batching every command beyond the dedicated
// connections was 0.58–0.74 at 16 goroutines (a batch waits for the one
// before it), and not batching 0.86–0.97 from 16 on.
func batchFrom(lanes int32) int32 { return 8 * lanes }

// retryAfterDial is how long the maker waits after a connection it made
// failed its first PING, so that an outage costs one dial at a time.
const retryAfterDial = 100 * time.Millisecond

// newDirect returns the router of c, or nil for a cluster client. A
// sentinel client's router has no dedicated connections (one would outlive
// a failover, still talking to the old primary), only the batches, which
// its pipeline carries to whichever primary it follows. A cluster's
// commands are left to valkey-go: a dedicated client is tied to the slot
// of its first command, and a batch would wait for its slowest node.
func newDirect(c valkeygo.Client, sh *shared) *direct {
	if c == nil {
		return nil
	}
	n := directLanes()
	d := &direct{c: c, sh: sh, b: newBatcher(sh), batchFrom: batchFrom(n), stop: make(chan struct{})}
	switch c.Mode() {
	case valkeygo.ClientModeStandalone:
		d.lanes, d.free = n, make(chan *lane, n)
		sh.onLost = d.dropIdle
	case valkeygo.ClientModeSentinel:
	default:
		return nil
	}
	return d
}

// do sends cmd, down a dedicated connection when few commands are in
// flight, one is free and ctx can end only at its deadline, through the
// client's pipeline otherwise, and in a batch on it from batchFrom on. A non-nil error is the batcher's (see
// batcher.do); any other is in the reply.
func (d *direct) do(ctx context.Context, cmd valkeygo.Completed) (valkeygo.ValkeyResult, error) {
	defer d.inflight.Add(-1)
	n := d.inflight.Add(1)
	// A dedicated connection's socket sees ctx's deadline alone: a caller
	// whose context may be cancelled before it takes the pipeline, which
	// returns at the cancellation.
	if n <= d.lanes && !ctxend.Early(ctx) {
		select {
		case l := <-d.free:
			resp := l.dc.Do(ctx, cmd)
			err := resp.NonValkeyError()
			d.put(l, err == nil, broke(ctx, err))
			return resp, nil
		default:
			d.grow()
		}
	}
	if n > d.batchFrom {
		return d.b.do(ctx, cmd)
	}
	return d.sh.Do(ctx, cmd), nil
}

// put takes back l after a command: idle again when it is sound and the
// store open, given back to the client otherwise (and replaced, when it
// failed). A lane that failed takes the idle ones with it, and one whose
// connection broke (not its caller's deadline: valkey-go closes a
// dedicated connection then) the pipelined ones (shared) too: they talk
// to the same server, and when it went away they died with it, so each
// would cost a call an unknown outcome before the store learnt it. The
// makers dial them again (and, while the server is gone, are refused at
// once).
func (d *direct) put(l *lane, sound, broke bool) {
	d.mu.Lock()
	if sound && !d.closed {
		d.free <- l // never blocks: free has room for every lane made
		d.mu.Unlock()
		return
	}
	d.made--
	d.mu.Unlock()
	d.drops.drop(l)
	if !sound {
		d.dropIdle()
		if broke {
			d.sh.lost()
		}
		d.grow()
	}
}

// dropIdle gives every idle lane back to the client, for the maker to dial
// again: the server went away (see put).
func (d *direct) dropIdle() {
	var gone []*lane
	d.mu.Lock()
	for len(d.free) > 0 {
		gone = append(gone, <-d.free)
	}
	d.made -= len(gone)
	d.mu.Unlock()
	for _, g := range gone {
		d.drops.drop(g)
	}
}

// grow starts the maker unless it runs or every lane is made.
func (d *direct) grow() {
	d.mu.Lock()
	full := d.closed || d.made >= int(d.lanes)
	d.mu.Unlock()
	if full || !d.making.CompareAndSwap(false, true) {
		return
	}
	go d.make()
}

// make dials dedicated connections until every lane is made, the store
// closes, or one fails its PING (then it waits retryAfterDial first, and
// the next call that finds no lane starts it again).
func (d *direct) make() {
	defer d.making.Store(false)
	for {
		d.mu.Lock()
		if d.closed || d.made >= int(d.lanes) {
			d.mu.Unlock()
			return
		}
		d.made++
		d.mu.Unlock()
		l, ok := dialLane(d.c, d.stop)
		if !ok {
			d.mu.Lock()
			d.made--
			d.mu.Unlock()
			return
		}
		d.put(l, true, false)
	}
}

// dialLane makes a dedicated connection of c and checks it with a PING,
// in a maker's goroutine. One that fails is given back, and dialLane waits
// retryAfterDial (or until stop closes) before it reports it.
func dialLane(c valkeygo.Client, stop <-chan struct{}) (*lane, bool) {
	dc, release := c.Dedicate()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err := dc.Do(ctx, dc.B().Ping().Build()).Error()
	cancel()
	if err != nil {
		dc.Close() // given back open, it would wait for the server (see dropper)
		release()
		select {
		case <-time.After(retryAfterDial):
		case <-stop:
		}
		return nil, false
	}
	return &lane{dc: dc, release: release}, true
}

// close gives every idle lane back to the client (d.drops, which the
// store's Close waits for); a lane in use, or one the maker is still
// dialling, is given back when it comes to put.
func (d *direct) close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	close(d.stop)
	d.mu.Unlock()
	d.dropIdle() // put gives back the lanes in use: the store is closed
}
