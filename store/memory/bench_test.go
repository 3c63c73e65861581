package memory

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/inproc"
	"github.com/sluicehq/sluice/store"
	"golang.org/x/time/rate"
)

// benchPolicy admits everything a benchmark can send (a million per second,
// a burst of a billion), so every decision takes the write path, the dearer
// one; the x/time/rate reference is configured alike.
var benchPolicy = core.Policy{Name: "bench", Limit: 1_000_000_000, Window: 1000 * time.Second, Burst: 1_000_000_000}

// benchDebt is what each key is charged before a benchmark starts: 100s of
// the policy's rate, so that no key expires during the run (an idle bucket
// refills and its key expires; this measures existing keys).
const benchDebt = 100_000_000

const benchKeys = 100_000

// benchIDs are built once, so that the benchmarks measure decisions, not
// string formatting.
var benchIDs = func() []string {
	ids := make([]string, benchKeys)
	for i := range ids {
		ids[i] = "user-" + strconv.Itoa(i)
	}
	return ids
}()

func benchAlgorithms() []core.Algorithm {
	return []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}}
}

// BenchmarkAllow measures Limiter.Allow over a default memory store, on one
// key and spread over 100k existing keys, serially and in parallel.
func BenchmarkAllow(b *testing.B) {
	for _, alg := range benchAlgorithms() {
		b.Run(alg.Name(), func(b *testing.B) {
			for _, keys := range []int{1, benchKeys} {
				name := "1key"
				if keys > 1 {
					name = "100kkeys"
				}
				b.Run("serial/"+name, func(b *testing.B) {
					l := benchLimiter(b, alg, keys)
					ctx := context.Background()
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						if _, err := l.Allow(ctx, benchIDs[i]); err != nil {
							b.Fatal(err)
						}
						if i++; i == keys {
							i = 0
						}
					}
				})
				b.Run("parallel/"+name, func(b *testing.B) {
					l := benchLimiter(b, alg, keys)
					ctx := context.Background()
					b.ReportAllocs()
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						i := rand.IntN(keys)
						for pb.Next() {
							if _, err := l.Allow(ctx, benchIDs[i]); err != nil {
								b.Error(err)
								return
							}
							if i++; i == keys {
								i = 0
							}
						}
					})
				})
			}
		})
	}
}

// benchOrder is the order keys are created in: a shuffle, so that the
// benchmarks, which visit the keys in sequence, do not walk memory in the
// order it was allocated in (real traffic does not).
func benchOrder(keys int) []int {
	return rand.New(rand.NewPCG(1, 2)).Perm(keys)
}

// benchLimiter returns a Limiter over a fresh default store in which the
// first keys identities already exist, charged benchDebt.
func benchLimiter(b *testing.B, alg core.Algorithm, keys int) *core.Limiter {
	s := New(nil)
	b.Cleanup(func() { s.Close() })
	l := newLimiter(b, s, alg, benchPolicy, nil)
	for _, i := range benchOrder(keys) {
		if d, err := l.AllowN(context.Background(), benchIDs[i], benchDebt); err != nil || !d.Allowed {
			b.Fatalf("populating %s: %+v, %v", benchIDs[i], d, err)
		}
	}
	return l
}

// BenchmarkXTimeRate is the reference: golang.org/x/time/rate's Allow at
// the same rate and burst, on one limiter (one key), and on 100k limiters
// in a map under a mutex, the usual way to give each key its own.
func BenchmarkXTimeRate(b *testing.B) {
	newRate := func() *rate.Limiter {
		return rate.NewLimiter(rate.Limit(float64(benchPolicy.Limit)/benchPolicy.Window.Seconds()), int(benchPolicy.Burst))
	}
	b.Run("serial/1key", func(b *testing.B) {
		l := newRate()
		b.ReportAllocs()
		for b.Loop() {
			if !l.Allow() {
				b.Fatal("denied")
			}
		}
	})
	b.Run("parallel/1key", func(b *testing.B) {
		l := newRate()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !l.Allow() {
					b.Error("denied")
					return
				}
			}
		})
	})
	var mu sync.Mutex
	keyed := make(map[string]*rate.Limiter, benchKeys)
	for _, id := range benchIDs {
		keyed[id] = newRate()
	}
	allow := func(id string) bool {
		mu.Lock()
		l := keyed[id]
		mu.Unlock()
		return l.Allow()
	}
	b.Run("serial/100kkeys", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if !allow(benchIDs[i]) {
				b.Fatal("denied")
			}
			if i++; i == benchKeys {
				i = 0
			}
		}
	})
	b.Run("parallel/100kkeys", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := rand.IntN(benchKeys)
			for pb.Next() {
				if !allow(benchIDs[i]) {
					b.Error("denied")
					return
				}
				if i++; i == benchKeys {
					i = 0
				}
			}
		})
	})
}

// benchMutation rewrites one byte of the state in place, like a step on an
// existing key, and carries its time as a Limiter's mutation does.
type benchMutation struct{ now int64 }

func (m *benchMutation) Apply(state []byte) ([]byte, time.Duration) {
	if len(state) == 0 {
		state = make([]byte, 9)
	}
	state[0]++
	return state, time.Hour
}

func (m *benchMutation) Now() int64 { return m.now }

// BenchmarkUpdate measures the store alone, without a Limiter or an
// algorithm: the key hash, the shard lock, the lookup and the write.
func BenchmarkUpdate(b *testing.B) {
	for _, keys := range []int{1, benchKeys} {
		name := "1key"
		if keys > 1 {
			name = "100kkeys"
		}
		b.Run("serial/"+name, func(b *testing.B) {
			s := New(nil)
			b.Cleanup(func() { s.Close() })
			ks := make([]store.Key, keys)
			m := &benchMutation{now: time.Now().UnixMicro()}
			for i := range ks {
				ks[i] = store.Key{Namespace: "sluice:bench", Identity: benchIDs[i]}
			}
			for _, i := range benchOrder(keys) {
				if err := s.Update(context.Background(), ks[i], m); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := s.Update(ctx, ks[i], m); err != nil {
					b.Fatal(err)
				}
				if i++; i == keys {
					i = 0
				}
			}
		})
	}
}

// floorStore keeps one state for every key and does nothing else: a
// Limiter over it costs what the Limiter, its clock read and the algorithm
// cost, the floor under any in-process store. It binds (inproc.Binder) as the
// memory store does, so a Limiter takes the same road over both. It is not
// safe for concurrent use and serves only BenchmarkLimiterFloor.
type floorStore struct{ state []byte }

func (f *floorStore) Update(_ context.Context, _ store.Key, m store.Mutation) error {
	if next, _ := m.Apply(f.state); next != nil {
		f.state = next
	}
	return nil
}

func (*floorStore) InProcess() {}

func (f *floorStore) Bind(string) inproc.Taker { return f }

func (f *floorStore) Take(_ string, alg core.Algorithm, now, n int64, p *core.Policy) (core.Decision, error) {
	next, _, d := alg.Step(f.state, now, n, p)
	if next != nil {
		f.state = next
	}
	return d, nil
}

func (f *floorStore) TakeFields(id string, alg core.Algorithm, now, n int64, p *core.Policy) (allowed, degraded bool, limit, remaining int64, retryAfter, resetAfter, delay time.Duration, err error) {
	d, err := f.Take(id, alg, now, n, p)
	return d.Allowed, d.Degraded, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter, d.Delay, err
}

// BenchmarkLimiterFloor is Limiter.Allow over floorStore: subtracted from
// BenchmarkAllow's serial 1-key figure, it leaves what the memory store adds.
func BenchmarkLimiterFloor(b *testing.B) {
	for _, alg := range benchAlgorithms() {
		b.Run(alg.Name()+"/serial/1key", func(b *testing.B) {
			l := newLimiter(b, &floorStore{}, alg, benchPolicy, nil)
			ctx := context.Background()
			if _, err := l.AllowN(ctx, benchIDs[0], benchDebt); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Allow(ctx, benchIDs[0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var sinkMicros int64

// BenchmarkTimeNow is time.Now, which rate.Allow reads on every call, for
// scale. A Limiter without a Clock reads only the monotonic clock (about
// half the cost) and adds it to a wall-clock anchor.
func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		sinkMicros += time.Now().UnixMicro()
	}
}

// BenchmarkNewKeyInFullStore measures the dearest road through the store: a
// new key arriving at a full shard, which evicts the key that expires
// first among a few (100k identities cycle through 10k places, so every
// one is new when it comes back).
func BenchmarkNewKeyInFullStore(b *testing.B) {
	s := New(&Options{MaxKeys: benchKeys / 10, SweepInterval: -1})
	b.Cleanup(func() { s.Close() })
	ks := make([]store.Key, benchKeys)
	for i := range ks {
		ks[i] = store.Key{Namespace: "sluice:bench", Identity: benchIDs[i]}
	}
	m := &benchMutation{now: time.Now().UnixMicro()}
	for i := range ks {
		if err := s.Update(context.Background(), ks[i], m); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := s.Update(ctx, ks[i], m); err != nil {
			b.Fatal(err)
		}
		if i++; i == benchKeys {
			i = 0
		}
	}
}
