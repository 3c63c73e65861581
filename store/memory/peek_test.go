package memory

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/inproc"
)

// peekAlgorithms are the algorithms that let a refusal be decided without
// the shard's lock (inproc.Peeker).
var peekAlgorithms = []core.Algorithm{
	algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.FixedWindow{},
	algorithm.LeakyBucket{}, algorithm.SlidingCounter{},
}

func bindTaker(t *testing.T, s *Store) inproc.FieldTaker {
	t.Helper()
	return s.Bind("test:p").(inproc.FieldTaker)
}

func takeAt(t *testing.T, tk inproc.FieldTaker, alg core.Algorithm, id string, now, n int64, p *core.Policy) core.Decision {
	t.Helper()
	d, err := tk.Take(id, alg, now, n, p)
	if err != nil {
		t.Fatalf("Take(%q, %d): %v", id, now, err)
	}
	return d
}

// A key that is refused is refused without its shard's lock: with the lock
// held by someone else, a decision on the exhausted key still comes back.
func TestPeekRefusesWithoutTheLock(t *testing.T) {
	s := newStore(t, &Options{SweepInterval: -1, Shards: 1})
	tk := bindTaker(t, s)
	p := &core.Policy{Name: "p", Limit: 1, Window: time.Hour}
	now := epoch.UnixMicro()
	if d := takeAt(t, tk, algorithm.GCRA{}, "a", now, 1, p); !d.Allowed {
		t.Fatalf("first decision %+v, want admitted", d)
	}
	if d := takeAt(t, tk, algorithm.GCRA{}, "a", now, 1, p); d.Allowed {
		t.Fatalf("second decision %+v, want refused", d)
	}
	sh := &s.shards[0]
	sh.mu.Lock()
	got := make(chan core.Decision, 1)
	go func() {
		d, _ := tk.Take("a", algorithm.GCRA{}, now+1, 1, p)
		got <- d
	}()
	select {
	case d := <-got:
		sh.mu.Unlock()
		if d.Allowed || d.RetryAfter <= 0 {
			t.Fatalf("refusal without the lock: %+v, want refused with a RetryAfter", d)
		}
	case <-time.After(5 * time.Second):
		sh.mu.Unlock()
		<-got
		t.Fatal("a decision on a refused key waited for the shard's lock")
	}
}

// Every decision through the store is the one the algorithm's step makes on
// the key's state, whether it came from the copy or under the lock: a run
// of random costs and times, with admissions, refusals, refills and
// expiries, against the pure step on a state of the test's own.
func TestPeekDecidesAsTheStep(t *testing.T) {
	for _, alg := range peekAlgorithms {
		t.Run(alg.Name(), func(t *testing.T) {
			s := newStore(t, &Options{SweepInterval: -1, Shards: 1})
			tk := bindTaker(t, s)
			p := &core.Policy{Name: "p", Limit: 5, Window: time.Second, Burst: 5}
			rng := rand.New(rand.NewPCG(1, 2))
			now := epoch.UnixMicro()
			var state []byte
			var expires int64
			peeked := 0
			for i := range 5000 {
				switch r := rng.IntN(100); {
				case r < 70:
				case r < 95:
					now += rng.Int64N(300_000)
				default:
					now += rng.Int64N(5_000_000)
				}
				n := 1 + rng.Int64N(3)
				if now >= expires {
					state = nil
				}
				sh := &s.shards[0]
				_, _, _, _, copied := sh.peek.read(s.keys.identity(s.keys.namespace("test:p"), "k").slot(), now)
				next, ttl, want := alg.Step(append([]byte(nil), state...), now, n, p)
				got := takeAt(t, tk, alg, "k", now, n, p)
				if got != want {
					t.Fatalf("decision %d at %d, n %d: store %+v, step %+v", i, now, n, got, want)
				}
				if copied && next == nil {
					peeked++
				}
				if next != nil {
					state, expires = next, expiry(now, ttl)
				}
			}
			if peeked == 0 {
				t.Fatal("no decision was made from the copy: the run tests only the locked path")
			}
		})
	}
}

// Whatever changes or drops the key withdraws the copy: a Delete (the
// Limiter's Reset), a write through Update, its expiry and Close each end
// the refusals it served.
func TestPeekWithdrawn(t *testing.T) {
	p := &core.Policy{Name: "p", Limit: 1, Window: time.Hour}
	now := epoch.UnixMicro()
	// exhausted is a one-shard store with key a refused from its copy.
	exhausted := func(t *testing.T, opts *Options) (*Store, inproc.FieldTaker) {
		t.Helper()
		s := newStore(t, opts)
		tk := bindTaker(t, s)
		takeAt(t, tk, algorithm.GCRA{}, "a", now, 1, p)
		for range 2 {
			if d := takeAt(t, tk, algorithm.GCRA{}, "a", now, 1, p); d.Allowed {
				t.Fatalf("exhausted key admitted: %+v", d)
			}
		}
		if _, _, _, _, ok := s.shards[0].peek.read(s.keys.identity(s.keys.namespace("test:p"), "a").slot(), now); !ok {
			t.Fatal("no copy was published by the refusal")
		}
		return s, tk
	}
	t.Run("Delete", func(t *testing.T) {
		s, tk := exhausted(t, &Options{SweepInterval: -1, Shards: 1})
		if err := s.Delete(context.Background(), key("a")); err != nil {
			t.Fatal(err)
		}
		if d := takeAt(t, tk, algorithm.GCRA{}, "a", now, 1, p); !d.Allowed {
			t.Fatalf("after Delete: %+v, want a fresh key admitted", d)
		}
	})
	t.Run("Update", func(t *testing.T) {
		s, tk := exhausted(t, &Options{SweepInterval: -1, Shards: 1})
		// A write of an empty GCRA state (a TAT of now) through Update, as a
		// refund or a multi-limit decision writes.
		fresh, _, _ := algorithm.GCRA{}.Step(nil, now-time.Hour.Microseconds(), 1, p)
		write(t, s, key("a"), fresh, time.Hour)
		if d := takeAt(t, tk, algorithm.GCRA{}, "a", now, 1, p); !d.Allowed {
			t.Fatalf("after a write through Update: %+v, want admitted", d)
		}
	})
	t.Run("expiry", func(t *testing.T) {
		_, tk := exhausted(t, &Options{SweepInterval: -1, Shards: 1})
		if d := takeAt(t, tk, algorithm.GCRA{}, "a", now+time.Hour.Microseconds(), 1, p); !d.Allowed {
			t.Fatalf("after the key's TTL: %+v, want admitted", d)
		}
	})
	t.Run("Close", func(t *testing.T) {
		s, tk := exhausted(t, &Options{SweepInterval: -1, Shards: 1})
		s.Close()
		if _, err := tk.Take("a", algorithm.GCRA{}, now, 1, p); err != ErrClosed {
			t.Fatalf("after Close: %v, want ErrClosed", err)
		}
	})
	t.Run("evicted", func(t *testing.T) {
		_, tk := exhausted(t, &Options{SweepInterval: -1, Shards: 1, MaxKeys: 1})
		takeAt(t, tk, algorithm.GCRA{}, "b", now, 1, p) // evicts a, the only key
		if d := takeAt(t, tk, algorithm.GCRA{}, "a", now, 1, p); !d.Allowed {
			t.Fatalf("after a was evicted: %+v, want admitted", d)
		}
	})
}

// Refusals from the copy, admissions under the lock and Resets, all at
// once: every Reset gives exactly Limit more admissions, never one more.
func TestPeekConcurrentExact(t *testing.T) {
	const limit, workers, resets = 20, 4, 30
	s := newStore(t, &Options{SweepInterval: -1})
	tk := bindTaker(t, s)
	p := &core.Policy{Name: "p", Limit: limit, Window: time.Hour}
	now := epoch.UnixMicro()
	for r := range resets + 1 {
		var wg sync.WaitGroup
		counts := make([]int, workers)
		for w := range workers {
			wg.Go(func() {
				for range 4 * limit {
					d, err := tk.Take("hot", algorithm.GCRA{}, now, 1, p)
					if err != nil {
						panic(err)
					}
					if d.Allowed {
						counts[w]++
					}
				}
			})
		}
		wg.Wait()
		total := 0
		for _, c := range counts {
			total += c
		}
		if total != limit {
			t.Fatalf("round %d: %d admitted, want exactly %d", r, total, limit)
		}
		if err := s.Delete(context.Background(), key("hot")); err != nil {
			t.Fatal(err)
		}
	}
}

// A refusal from the copy allocates nothing.
func TestPeekAllocs(t *testing.T) {
	for _, alg := range peekAlgorithms {
		s := newStore(t, &Options{SweepInterval: -1, Shards: 1})
		tk := bindTaker(t, s)
		p := &core.Policy{Name: "p", Limit: 1, Window: time.Hour}
		now := epoch.UnixMicro()
		for range 3 {
			takeAt(t, tk, alg, "a", now, 1, p)
		}
		if n := testing.AllocsPerRun(200, func() { tk.TakeFields("a", alg, now, 1, p) }); n != 0 {
			t.Errorf("%s: %v allocations a refusal, want 0", alg.Name(), n)
		}
	}
}
