package core

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
)

// casMem is a CASBackend over a map with versions; conflicts can be injected.
type casMem struct {
	mu       sync.Mutex
	val      map[string][]byte
	ver      map[string]int
	conflict int // the next conflict Swaps fail as if another writer won
	loads    atomic.Int64
	swaps    atomic.Int64
	swapErr  error
}

func newCASMem() *casMem { return &casMem{val: map[string][]byte{}, ver: map[string]int{}} }

func (c *casMem) Load(ctx context.Context, key string) ([]byte, any, error) {
	c.loads.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.val[key]
	if !ok {
		return nil, nil, nil
	}
	return append([]byte(nil), v...), c.ver[key], nil
}

func (c *casMem) Swap(ctx context.Context, key string, token any, next []byte, ttl time.Duration) (bool, error) {
	c.swaps.Add(1)
	if c.swapErr != nil {
		return false, c.swapErr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conflict > 0 {
		c.conflict--
		return false, nil
	}
	_, exists := c.val[key]
	if token == nil && exists || token != nil && (!exists || c.ver[key] != token.(int)) {
		return false, nil
	}
	c.val[key] = append([]byte(nil), next...)
	c.ver[key]++
	return true, nil
}

type casStore struct {
	b *casMem
	r store.RetryPolicy
}

func (s casStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	_, err := store.CASUpdate(ctx, s.b, key.String(), m, s.r)
	return err
}

func TestCASUpdateNoOverAdmission(t *testing.T) {
	b := newCASMem()
	l := newTestLimiter(t, Config{Store: casStore{b: b}, Policy: Policy{Name: "api", Limit: 25, Window: time.Second}})
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			d, err := l.Allow(context.Background(), "k")
			if err != nil {
				t.Errorf("Allow: %v", err)
			}
			if d.Allowed {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 25 {
		t.Fatalf("admitted %d, want exactly 25", got)
	}
}

func TestCASUpdateRetriesConflicts(t *testing.T) {
	b := newCASMem()
	b.conflict = 3
	l := newTestLimiter(t, Config{Store: casStore{b: b}})
	d, err := l.Allow(context.Background(), "k")
	if err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("got %+v, %v", d, err)
	}
	if got := b.swaps.Load(); got != 4 {
		t.Fatalf("swaps = %d, want 3 conflicts + 1 success", got)
	}
}

func TestCASUpdateGivesUp(t *testing.T) {
	b := newCASMem()
	b.conflict = 1 << 30
	r := store.RetryPolicy{MaxAttempts: 5, BaseBackoff: time.Microsecond, MaxBackoff: time.Microsecond}
	n, err := store.CASUpdate(context.Background(), b, "k", &mutation{alg: counter{}, p: &testPolicy, n: 1}, r)
	var ce *store.ContentionError
	if !errors.As(err, &ce) || ce.Attempts != 5 || n != 5 || !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrContention) {
		t.Fatalf("attempts %d, err %v; want a ContentionError after 5", n, err)
	}
}

func TestCASUpdateDoesNotRetryErrors(t *testing.T) {
	b := newCASMem()
	b.swapErr = errors.New("i/o timeout")
	_, err := store.CASUpdate(context.Background(), b, "k", &mutation{alg: counter{}, p: &testPolicy, n: 1}, store.RetryPolicy{})
	if err == nil || b.swaps.Load() != 1 {
		t.Fatalf("err %v after %d swaps; a failed swap may have written and must not be retried", err, b.swaps.Load())
	}
}

func TestCASUpdateSkipsWriteWhenUnchanged(t *testing.T) {
	b := newCASMem()
	p := Policy{Name: "api", Limit: 1, Window: time.Second}
	m := &mutation{alg: counter{}, p: &p, n: 1}
	if _, err := store.CASUpdate(context.Background(), b, "k", m, store.RetryPolicy{}); err != nil || !m.d.Allowed {
		t.Fatal(err)
	}
	if _, err := store.CASUpdate(context.Background(), b, "k", m, store.RetryPolicy{}); err != nil || m.d.Allowed {
		t.Fatalf("second unit on a limit of 1: %+v %v", m.d, err)
	}
	if got := b.swaps.Load(); got != 1 {
		t.Fatalf("swaps = %d; a denial must not write", got)
	}
}

func TestCASUpdateStopsOnContext(t *testing.T) {
	b := newCASMem()
	b.conflict = 1 << 30
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	r := store.RetryPolicy{MaxAttempts: 1 << 30, BaseBackoff: time.Millisecond, MaxBackoff: time.Millisecond}
	_, err := store.CASUpdate(ctx, b, "k", &mutation{alg: counter{}, p: &testPolicy, n: 1}, r)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want the context's deadline", err)
	}
}
