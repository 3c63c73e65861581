package batch

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeCall is a call of the fake server: the batcher's part and how it
// went out.
type fakeCall struct {
	Call
	id      int
	sentBy  string // "one", or "many" with the batch's size in batch
	batch   int
	hasDead bool // the batch's context had a deadline
}

// fakeServer sends calls by recording them; a call alone waits for
// gateOne to close, a batch for gateMany (neither waits when nil).
type fakeServer struct {
	mu                sync.Mutex
	gateOne, gateMany chan struct{}
	batches           [][]int
	sent              map[int]int // id → times sent
}

func newFake() (*fakeServer, *Batcher[fakeCall]) {
	f := &fakeServer{sent: map[int]int{}}
	b := New(2, 3, func(c *fakeCall) *Call { return &c.Call },
		func(_ context.Context, c *fakeCall) {
			f.wait(f.gateOne)
			f.mu.Lock()
			f.sent[c.id]++
			f.mu.Unlock()
			c.sentBy = "one"
		},
		func(ctx context.Context, cs []*fakeCall) {
			f.wait(f.gateMany)
			_, dl := ctx.Deadline()
			f.mu.Lock()
			ids := []int{}
			for _, c := range cs {
				f.sent[c.id]++
				ids = append(ids, c.id)
				c.sentBy, c.batch, c.hasDead = "many", len(cs), dl
			}
			f.batches = append(f.batches, ids)
			f.mu.Unlock()
		})
	return f, b
}

func (f *fakeServer) wait(g chan struct{}) {
	if g != nil {
		<-g
	}
}

func newCall(id int) *fakeCall { return &fakeCall{Call: NewCall(), id: id} }

// waitQueued waits until n calls are queued behind busy lanes.
func waitQueued(t *testing.T, b *Batcher[fakeCall], n int) {
	t.Helper()
	waitFor(t, b, "calls queued", n, func(_, q int) int { return q })
}

// waitBusy waits until n lanes are in use.
func waitBusy(t *testing.T, b *Batcher[fakeCall], n int) {
	t.Helper()
	waitFor(t, b, "lanes busy", n, func(l, _ int) int { return l })
}

// waitFor waits, for two seconds at most, until of(b.Busy()) is n.
func waitFor(t *testing.T, b *Batcher[fakeCall], what string, n int, of func(lanes, queued int) int) {
	t.Helper()
	for range 2000 {
		if of(b.Busy()) == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d %s, want %d", of(b.Busy()), what, n)
}

// A lone call goes out at once, alone, and frees its lane.
func TestLoneCallAlone(t *testing.T) {
	_, b := newFake()
	c := newCall(1)
	if got := b.Do(context.Background(), c); got != Sent || c.sentBy != "one" {
		t.Fatalf("Do = %v, sent by %q; want Sent, alone", got, c.sentBy)
	}
	if l, q := b.Busy(); l != 0 || q != 0 {
		t.Fatalf("after the call: %d lanes busy, %d queued", l, q)
	}
}

// With every lane busy, calls queue and go out together, at most max to a
// batch, each exactly once, when a lane's round trip ends.
func TestQueuedCallsBatched(t *testing.T) {
	f, b := newFake()
	f.gateOne = make(chan struct{})
	var wg sync.WaitGroup
	calls := make([]*fakeCall, 7)
	outcomes := make([]Outcome, len(calls))
	for i := range 2 { // the two lanes
		calls[i] = newCall(i)
		wg.Go(func() { outcomes[i] = b.Do(context.Background(), calls[i]) })
	}
	waitBusy(t, b, 2)
	for i := 2; i < len(calls); i++ {
		calls[i] = newCall(i)
		wg.Go(func() { outcomes[i] = b.Do(context.Background(), calls[i]) })
	}
	waitQueued(t, b, 5)
	close(f.gateOne)
	wg.Wait()
	for i, c := range calls {
		if outcomes[i] != Sent || f.sent[c.id] != 1 {
			t.Errorf("call %d: %v, sent %d times; want Sent once", i, outcomes[i], f.sent[c.id])
		}
		if i >= 2 && (c.sentBy != "many" || c.hasDead) {
			t.Errorf("queued call %d went out %q (deadline %v), want in a batch with none", i, c.sentBy, c.hasDead)
		}
	}
	for _, bt := range f.batches {
		if len(bt) > 3 {
			t.Errorf("a batch of %d, want at most 3", len(bt))
		}
	}
	if got := b.Batches(); got != int64(len(f.batches)) || got < 2 {
		t.Errorf("Batches() = %d, the server saw %d; want them equal, at least 2 for 5 calls", got, len(f.batches))
	}
	// The batch's sender hands each call its reply before it frees its
	// lane: the lanes come free just after the last call returns.
	waitQueued(t, b, 0)
	waitBusy(t, b, 0)
}

// A queued call whose context ends before a batch takes it, or whose
// deadline has passed when a worker comes to it, is never sent; one that
// leaves while its batch is out is Held. A batch carries the latest
// deadline of its calls.
func TestDeadlines(t *testing.T) {
	f, b := newFake()
	f.gateOne, f.gateMany = make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var lanes [2]Outcome
	for i := range lanes {
		wg.Go(func() { lanes[i] = b.Do(context.Background(), newCall(100+i)) })
	}
	waitBusy(t, b, 2)
	// Behind the lanes: short leaves at its deadline; lapsed's deadline
	// passes while it waits, but its caller sees it only later (its Done
	// closes when the test says); held is taken, and leaves while its
	// batch is out.
	ctx1, cancel1 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel1()
	var o1, o2, o3 Outcome
	wg.Go(func() { o1 = b.Do(ctx1, newCall(1)) })
	waitQueued(t, b, 1)
	ctx2 := deadlineOnly{Context: context.Background(), at: time.Now().Add(30 * time.Millisecond), done: make(chan struct{})}
	wg.Go(func() { o2 = b.Do(ctx2, newCall(2)) })
	waitQueued(t, b, 2)
	held := newCall(3)
	ctx3, cancel3 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel3()
	done3 := make(chan struct{})
	go func() { o3 = b.Do(ctx3, held); close(done3) }()
	waitQueued(t, b, 3)
	time.Sleep(50 * time.Millisecond) // both short deadlines are past

	close(f.gateOne) // the lanes' round trips end: a worker takes held alone
	waitQueued(t, b, 0)
	cancel3() // held's caller leaves while its batch is out
	<-done3
	close(ctx2.done) // lapsed's caller sees its deadline
	close(f.gateMany)
	wg.Wait()
	waitBusy(t, b, 0)
	if o1 != NotSent || f.sent[1] != 0 {
		t.Errorf("the call that left while queued: %v, sent %d times; want NotSent, never", o1, f.sent[1])
	}
	if o2 != NotSent || f.sent[2] != 0 {
		t.Errorf("the call past its deadline when the worker came: %v, sent %d times; want NotSent, never", o2, f.sent[2])
	}
	if o3 != Held || f.sent[3] != 1 || !held.hasDead || held.batch != 1 {
		t.Errorf("the call that left while its batch was out: %v, sent %d times in a batch of %d, deadline %v; want Held, once, alone, with one", o3, f.sent[3], held.batch, held.hasDead)
	}
	if lanes != [2]Outcome{Sent, Sent} {
		t.Errorf("the lanes' own calls: %v, want Sent", lanes)
	}
}

// deadlineOnly is a context whose Deadline is at, but whose Done closes
// only when the test says: a caller slow to notice its deadline.
type deadlineOnly struct {
	context.Context
	at   time.Time
	done chan struct{}
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.at, true }
func (c deadlineOnly) Done() <-chan struct{}       { return c.done }
func (c deadlineOnly) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
