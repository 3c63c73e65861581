package valkey_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// incr is a test Mutation: the state is a decimal counter, and each Update
// adds one. It writes into state's own array, as Apply may.
type incr struct {
	ttl  time.Duration
	seen int64 // the counter the successful attempt saw
}

func (m *incr) Apply(state []byte) ([]byte, time.Duration) {
	n, _ := strconv.ParseInt(string(state), 10, 64)
	m.seen = n
	return strconv.AppendInt(state[:0], n+1, 10), m.ttl
}

// keep is a test Mutation that never writes.
type keep struct{ calls int }

func (m *keep) Apply([]byte) ([]byte, time.Duration) { m.calls++; return nil, 0 }

func TestUpdateIsAtomicAcrossClients(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		// Two clients, as two instances of a fleet would have.
		s1, c := newStore(t, b.addrs(t))
		s2, _ := newStore(t, b.addrs(t))
		key := freshKey(t, c)
		const workers, each = 16, 20
		var ok atomic.Int64
		seen := make([]atomic.Bool, workers*each+1)
		var wg sync.WaitGroup
		for w := range workers {
			s := s1
			if w%2 == 1 {
				s = s2
			}
			wg.Go(func() {
				for range each {
					m := &incr{ttl: time.Minute}
					err := s.Update(context.Background(), key, m)
					switch {
					case err == nil:
						ok.Add(1)
						if m.seen < 0 || m.seen >= int64(len(seen)) || seen[m.seen].Swap(true) {
							t.Errorf("two updates saw counter %d: one was lost", m.seen)
						}
					case errors.Is(err, core.ErrContention):
					default:
						t.Errorf("Update: %v", err)
					}
				}
			})
		}
		wg.Wait()
		got, err := c.Do(context.Background(), c.B().Get().Key(key.String()).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if got != ok.Load() {
			t.Fatalf("counter = %d after %d successful updates", got, ok.Load())
		}
		if ok.Load() == 0 {
			t.Fatal("no update succeeded")
		}
	})
}

// TestUpdateWritesTTL: the key's TTL is the algorithm's plus the clock
// skew allowance, rounded up to whole milliseconds (PX refuses zero).
func TestUpdateWritesTTL(t *testing.T) {
	tests := []struct {
		name  string
		skew  time.Duration // Options.ClockSkew
		extra time.Duration // what it adds
	}{
		{"default skew", 0, valkey.DefaultClockSkew},
		{"250ms skew", 250 * time.Millisecond, 250 * time.Millisecond},
		{"no skew", -1, 0},
	}
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c := newClient(t, b.addrs(t))
				s := valkey.New(c, &valkey.Options{ClockSkew: tt.skew})
				key := freshKey(t, c)
				for i, ttl := range []time.Duration{time.Minute, 30 * time.Second, 1500 * time.Microsecond} {
					before := time.Now().UnixMilli()
					if err := s.Update(context.Background(), key, &incr{ttl: ttl}); err != nil {
						t.Fatal(err)
					}
					after := time.Now().UnixMilli()
					// The server's clock is this machine's: the absolute
					// expiry lies between the two readings plus the TTL.
					at, err := c.Do(context.Background(), c.B().Pexpiretime().Key(key.String()).Build()).AsInt64()
					if err != nil {
						t.Fatal(err)
					}
					want := (ttl + tt.extra + time.Millisecond - 1).Milliseconds()
					if at == -2 && want < 100 { // a TTL this short may already have run out
						continue
					}
					if at < before+want || at > after+want+1 {
						t.Fatalf("update %d (ttl %v): the key expires %dms after the write began, want %dms", i, ttl, at-before, want)
					}
				}
			})
		}
	})
}

func TestUpdateNilNextWritesNothing(t *testing.T) {
	s, c := newStore(t, backends[0].addrs(t))
	key := freshKey(t, c)
	if err := s.Update(context.Background(), key, nil); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Update with a nil mutation: err = %v, want ErrUnavailable", err)
	}
	m := &keep{}
	if err := s.Update(context.Background(), key, m); err != nil {
		t.Fatal(err)
	}
	if m.calls != 1 {
		t.Fatalf("Apply called %d times, want 1", m.calls)
	}
	n, err := c.Do(context.Background(), c.B().Exists().Key(key.String()).Build()).AsInt64()
	if err != nil || n != 0 {
		t.Fatalf("EXISTS = %d, %v; want 0", n, err)
	}
}

// TestUpdateContention: with one attempt allowed, a swap that loses its
// race gives up with a *store.ContentionError inside a *store.Error.
func TestUpdateContention(t *testing.T) {
	c := newClient(t, backends[0].addrs(t))
	s := valkey.New(c, &valkey.Options{Retry: store.RetryPolicy{MaxAttempts: 1}})
	key := freshKey(t, c)
	if err := s.Update(context.Background(), key, &incr{ttl: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// A mutation that changes the key under the swap's feet, as a racing
	// instance would.
	racer := &racingIncr{c: c, key: key.String()}
	err := s.Update(context.Background(), key, racer)
	var se *store.Error
	var ce *store.ContentionError
	if !errors.As(err, &se) || !errors.As(err, &ce) || !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("err = %v, want a *store.Error holding a *store.ContentionError", err)
	}
	if ce.Attempts != 1 {
		t.Fatalf("Attempts = %d, want 1", ce.Attempts)
	}
	got, err := c.Do(context.Background(), c.B().Get().Key(key.String()).Build()).ToString()
	if err != nil || got != "racer" {
		t.Fatalf("GET = %q, %v: the losing swap overwrote the racer", got, err)
	}
}

// racingIncr overwrites the key between the store's read and its swap.
type racingIncr struct {
	c   valkeygo.Client
	key string
}

func (m *racingIncr) Apply(state []byte) ([]byte, time.Duration) {
	m.c.Do(context.Background(), m.c.B().Set().Key(m.key).Value("racer").Build())
	return append(state, '!'), time.Minute
}
