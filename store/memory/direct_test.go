package memory

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// hidden is an algorithm the fast path does not know by its type, so its
// step is called through the interface.
type hidden struct{ core.Algorithm }

// The fast path calls the built-in steps directly (TakeFields). Each must
// decide, and leave the key's state, exactly as the same algorithm called
// through the interface: the same sequence of costs and times, on two
// stores, gives the same decisions and the same stored bytes.
func TestBuiltInStepsDecideAsThroughTheInterface(t *testing.T) {
	algs := []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.FixedWindow{},
		algorithm.SlidingCounter{}, algorithm.LeakyBucket{}, algorithm.SlidingLog{}}
	p := &core.Policy{Name: "direct", Limit: 7, Window: time.Second, Burst: 9, MaxDelay: 500 * time.Millisecond}
	for _, alg := range algs {
		t.Run(alg.Name(), func(t *testing.T) {
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			direct, through := New(nil), New(nil)
			defer direct.Close()
			defer through.Close()
			dt, tt := direct.Bind("ns").(*taker), through.Bind("ns").(*taker)
			rng := rand.New(rand.NewPCG(1, uint64(len(alg.Name()))))
			ids := []string{"a", "b", "c"}
			// An hour ahead of the wall clock, by which read judges expiry:
			// a state the decisions keep must not expire between the two
			// stores' reads (a fixed window's TTL can be a few ms).
			now := time.Now().Add(time.Hour).UnixMicro()
			admitted := 0
			for i := range 3000 {
				now += rng.Int64N(120_000)
				id := ids[rng.IntN(len(ids))]
				n := 1 + rng.Int64N(alg.Quota(p))
				a, g, lim, rem, retry, reset, delay, err := dt.TakeFields(id, alg, now, n, p)
				want := core.Decision{Allowed: a, Degraded: g, Limit: lim, Remaining: rem, RetryAfter: retry, ResetAfter: reset, Delay: delay}
				if err != nil {
					t.Fatalf("decision %d: %v", i, err)
				}
				a, g, lim, rem, retry, reset, delay, err = tt.TakeFields(id, hidden{alg}, now, n, p)
				got := core.Decision{Allowed: a, Degraded: g, Limit: lim, Remaining: rem, RetryAfter: retry, ResetAfter: reset, Delay: delay}
				if err != nil {
					t.Fatalf("decision %d through the interface: %v", i, err)
				}
				if got != want {
					t.Fatalf("decision %d (%s, n=%d): direct %+v, through the interface %+v", i, id, n, want, got)
				}
				if want.Allowed {
					admitted++
				}
				for _, id := range ids {
					k := store.Key{Namespace: "ns", Identity: id}
					if ds, ts := read(t, direct, k), read(t, through, k); string(ds) != string(ts) {
						t.Fatalf("decision %d: %s's state is %x direct, %x through the interface", i, id, ds, ts)
					}
				}
			}
			// The sequence must exercise both answers.
			if admitted == 0 || admitted == 3000 {
				t.Fatalf("%d of 3000 admitted: the sequence does not test refusals and admissions both", admitted)
			}
		})
	}
}
