package core_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// remote is the memory store seen as a network store (not InProcess), which
// counts its calls: each is a round trip a real store would make. When
// held is set, each reply waits on its way, after held received, until
// released.
type remote struct {
	s              *memory.Store
	calls          atomic.Int64
	held, released chan struct{}
}

func (r *remote) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	r.calls.Add(1)
	err := r.s.Update(ctx, key, m)
	if r.held != nil {
		r.held <- struct{}{}
		<-r.released
	}
	return err
}

func (r *remote) Delete(ctx context.Context, key store.Key) error { return r.s.Delete(ctx, key) }

// newRemote is a remote over a memory store of its own, closed with t.
func newRemote(t testing.TB) *remote {
	mem := memory.New(nil)
	t.Cleanup(func() { _ = mem.Close() })
	return &remote{s: mem}
}

// BenchmarkDenyCacheFlood floods one key that is over its limit, with the
// deny cache off and on: store calls per request, and decisions per second.
func BenchmarkDenyCacheFlood(b *testing.B) {
	for _, c := range []struct {
		name string
		opts *core.DenyCacheOptions
	}{{"off", nil}, {"on", &core.DenyCacheOptions{}}} {
		for _, parallel := range []bool{false, true} {
			name := c.name + "/serial"
			if parallel {
				name = c.name + "/parallel"
			}
			b.Run(name, func(b *testing.B) {
				st := &remote{s: memory.New(nil)}
				l, err := core.New(core.Config{Policy: core.PerMinute("flood", 10), Algorithm: algorithm.GCRA{}, Store: st, DenyCache: c.opts})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				for range 20 { // spend the quota: every request of the flood is refused
					_, _ = l.Allow(ctx, "abuser")
				}
				st.calls.Store(0)
				b.ReportAllocs()
				b.ResetTimer()
				if parallel {
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if d, _ := l.Allow(ctx, "abuser"); d.Allowed {
								b.Error("admitted")
							}
						}
					})
				} else {
					for range b.N {
						if d, _ := l.Allow(ctx, "abuser"); d.Allowed {
							b.Fatal("admitted")
						}
					}
				}
				b.ReportMetric(float64(st.calls.Load())/float64(b.N), "storecalls/op")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			})
		}
	}
}

// TestDenyCacheLeavesTheMemoryFastPathAlone: a memory limiter with a deny
// cache configured still decides with no allocation (the cache is off for
// an in-process store).
func TestDenyCacheLeavesTheMemoryFastPathAlone(t *testing.T) {
	l, err := core.New(core.Config{Policy: core.PerSecond("api", 1_000_000), Algorithm: algorithm.GCRA{}, Store: memory.New(nil), DenyCache: &core.DenyCacheOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if a := testing.AllocsPerRun(1000, func() { _, _ = l.Allow(ctx, "a") }); a != 0 {
		t.Fatalf("%v allocations per decision, want 0", a)
	}
}
