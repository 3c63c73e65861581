package memcache_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcache"
	"go.uber.org/goleak"
)

// slack is how much later than its deadline a call may return. It is far
// below the stalls these tests set up, so a Store that waits for the server
// instead of the deadline fails, yet large enough for a loaded machine.
const slack = time.Second

// verifyNoLeaks checks, after every other cleanup of the test, that no
// goroutine started during the test is left.
func verifyNoLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// TestStalledServerHonoursDeadline: a server that never answers holds a
// call no longer than its context's deadline, although gomemcache takes no
// context and its client Timeout is far longer; the abandoned round trip
// ends at the client's Timeout, and Close waits for it.
func TestStalledServerHonoursDeadline(t *testing.T) {
	verifyNoLeaks(t)
	c := gomemcache.New(silentServer(t))
	c.Timeout = 2 * time.Second
	s := memcache.New(c, nil)
	for _, op := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"update", func(ctx context.Context) error { return s.Update(ctx, uniqueKey(t), put("v", time.Minute)) }},
		{"delete", func(ctx context.Context) error { return s.Delete(ctx, uniqueKey(t)) }},
	} {
		const deadline = 50 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		err := op.call(ctx)
		took := time.Since(start)
		cancel()
		if took > deadline+slack {
			t.Errorf("%s: returned after %s on a stalled server, deadline %s", op.name, took, deadline)
		}
		var se *store.Error
		if !errors.As(err, &se) || !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: got %v, want a *store.Error matching core.ErrUnavailable and context.DeadlineExceeded", op.name, err)
		}
		if op.name == "update" && errors.Is(err, core.ErrOutcomeUnknown) {
			t.Errorf("update: %v matches core.ErrOutcomeUnknown, but only the gets was sent", err)
		}
		if op.name == "delete" && !errors.Is(err, core.ErrOutcomeUnknown) {
			t.Errorf("delete: %v does not match core.ErrOutcomeUnknown, but the delete was sent and may still land", err)
		}
	}
	if got := s.Stats().Abandoned; got != 2 {
		t.Errorf("Stats().Abandoned = %d, want 2", got)
	}
	// Close returns once the abandoned round trips have timed out.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestClientTimeoutWithoutDeadline: with a context that never ends, the
// client's Timeout is what bounds a call to a stalled server.
func TestClientTimeoutWithoutDeadline(t *testing.T) {
	verifyNoLeaks(t)
	c := gomemcache.New(silentServer(t))
	c.Timeout = 100 * time.Millisecond
	s := memcache.New(c, nil)
	defer s.Close()
	start := time.Now()
	err := s.Update(context.Background(), uniqueKey(t), put("v", time.Minute))
	if took := time.Since(start); took > c.Timeout+slack {
		t.Errorf("returned after %s, client Timeout %s", took, c.Timeout)
	}
	if !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("got %v, want an error matching core.ErrUnavailable", err)
	}
}

// TestAbandonedSwapIsUnknownOutcome: a cas or add still running at the
// deadline may land later, so the caller gets an error matching
// core.ErrOutcomeUnknown, never a plain failure; and when it does land, the
// Store counts it.
func TestAbandonedSwapIsUnknownOutcome(t *testing.T) {
	verifyNoLeaks(t)
	addr := firstServer(t)
	p := startProxy(t, addr, "add", "cas")
	c := gomemcache.New(p.addr())
	c.Timeout = 10 * time.Second
	s := memcache.New(c, nil)
	key := uniqueKey(t)

	const deadline = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := s.Update(ctx, key, put("late", time.Minute))
	if took := time.Since(start); took > deadline+slack {
		t.Errorf("returned after %s with the add stalled, deadline %s", took, deadline)
	}
	if !errors.Is(err, core.ErrOutcomeUnknown) || !errors.Is(err, core.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want an error matching core.ErrOutcomeUnknown, core.ErrUnavailable and context.DeadlineExceeded", err)
	}
	if st := s.Stats(); st.Abandoned != 1 || st.LateWrites != 0 {
		t.Fatalf("stats: %d abandoned, %d late writes; want 1 and 0", st.Abandoned, st.LateWrites)
	}

	// The stalled add now reaches the server and is stored.
	p.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.LateWrites != 1 {
		t.Fatalf("stats after the add landed: %d late writes, want 1", st.LateWrites)
	}
	if got := getValue(t, newClient(t, addr), memcache.Key(key)); got != "late" {
		t.Fatalf("stored %q, want \"late\"", got)
	}
	c.Close()
}

// TestEndedContextSendsNothing: a call whose context has already ended
// sends nothing.
func TestEndedContextSendsNothing(t *testing.T) {
	p := startProxy(t, firstServer(t))
	s := newStore(t, nil, p.addr())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Update(ctx, uniqueKey(t), put("v", time.Minute)); !errors.Is(err, context.Canceled) || !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Update: got %v, want an error matching context.Canceled and core.ErrUnavailable", err)
	}
	if err := s.Delete(ctx, uniqueKey(t)); !errors.Is(err, context.Canceled) || !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Delete: got %v, want an error matching context.Canceled and core.ErrUnavailable", err)
	}
	for _, verb := range []string{"gets", "add", "cas", "delete"} {
		if n := p.take(verb); n != 0 {
			t.Errorf("%d %s sent with an ended context", n, verb)
		}
	}
}

// TestClosedAndNilClient: a closed Store and one without a client refuse
// every call with an error matching core.ErrUnavailable.
func TestClosedAndNilClient(t *testing.T) {
	ctx := context.Background()
	closed := memcache.New(gomemcache.New("127.0.0.1:1"), nil)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    *memcache.Store
		want error
	}{{closed, memcache.ErrClosed}, {memcache.New(nil, nil), memcache.ErrNoClient}} {
		for _, err := range []error{
			tc.s.Update(ctx, uniqueKey(t), put("v", time.Minute)),
			tc.s.Delete(ctx, uniqueKey(t)),
		} {
			var se *store.Error
			if !errors.Is(err, tc.want) || !errors.Is(err, core.ErrUnavailable) || !errors.As(err, &se) {
				t.Errorf("got %v, want a *store.Error matching %v and core.ErrUnavailable", err, tc.want)
			}
		}
	}
}

// TestSwapErrorOutcome: a write that failed before anything was sent (the
// dial failed) has a known outcome, nothing written; one whose connection
// broke after the request went out may have been stored.
func TestSwapErrorOutcome(t *testing.T) {
	ctx := context.Background()

	// A port nobody listens on: the dial fails.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	s := memcache.New(gomemcache.New(refused), nil)
	_, err = memcache.CAS(s).Swap(ctx, "k", nil, []byte("v"), time.Minute)
	if err == nil || errors.Is(err, core.ErrOutcomeUnknown) {
		t.Errorf("add to a refused address: got %v, want an error not matching core.ErrOutcomeUnknown", err)
	}

	// A real memcached that answers SERVER_ERROR: a value above its item
	// size limit (1 MB by default) was refused, and nothing was stored.
	s = newStore(t, nil, firstServer(t))
	big := make([]byte, 2<<20)
	for _, token := range []bool{false, true} {
		key := memcache.Key(uniqueKey(t))
		var tok any
		if token {
			if ok, err := memcache.CAS(s).Swap(ctx, key, nil, []byte("v"), time.Minute); !ok || err != nil {
				t.Fatalf("add: %v, %v", ok, err)
			}
			_, tok, _ = memcache.CAS(s).Load(ctx, key)
		}
		_, err = memcache.CAS(s).Swap(ctx, key, tok, big, time.Minute)
		if err == nil || errors.Is(err, core.ErrOutcomeUnknown) {
			t.Errorf("a 2 MB value (cas %v): got %v, want an error not matching core.ErrOutcomeUnknown", token, err)
		}
		if v, _, _ := memcache.CAS(s).Load(ctx, key); len(v) > 1 {
			t.Errorf("a 2 MB value (cas %v) refused with SERVER_ERROR was stored", token)
		}
	}

	// A server that reads the request and hangs up.
	hangup := hangUpServer(t)
	s = memcache.New(gomemcache.New(hangup), nil)
	_, err = memcache.CAS(s).Swap(ctx, "k", nil, []byte("v"), time.Minute)
	if !errors.Is(err, core.ErrOutcomeUnknown) {
		t.Errorf("add whose connection broke: got %v, want an error matching core.ErrOutcomeUnknown", err)
	}
}

// hangUpServer reads one line from each connection and closes it.
func hangUpServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			bufio.NewReader(c).ReadString('\n')
			c.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// Close waits for every round trip on its way, not only the abandoned
// ones, so that no goroutine of the Store outlives it; and a call under
// way when the store closed sends nothing more: its next round trip fails
// with ErrClosed.
func TestCloseWaitsForRoundTripsOnTheirWay(t *testing.T) {
	verifyNoLeaks(t)
	addr := firstServer(t)
	p := startProxy(t, addr, "add")
	c := gomemcache.New(p.addr())
	c.Timeout = 10 * time.Second
	s := memcache.New(c, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	updated := make(chan error, 1)
	go func() { updated <- s.Update(ctx, uniqueKey(t), put("v", time.Minute)) }()
	time.Sleep(100 * time.Millisecond) // the add is held at the proxy
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
		t.Error("Close returned while an add was on its way")
	case <-time.After(100 * time.Millisecond):
	}
	p.Release()
	<-closed
	<-updated
	for _, verb := range []string{"gets", "add", "cas"} {
		p.take(verb)
	}
	if err := s.Update(context.Background(), uniqueKey(t), put("v", time.Minute)); !errors.Is(err, memcache.ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
	if n := p.take("gets") + p.take("add"); n != 0 {
		t.Errorf("%d commands sent after Close", n)
	}
	c.Close()
}
