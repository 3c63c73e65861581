package memory

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// A decision allocates nothing, also on a key that has expired (the step
// writes its fresh state into the slot's own buffer) and on a new key (into
// the shard's scratch buffer, which the slot then copies).
func TestDecisionsAllocateNothing(t *testing.T) {
	for _, alg := range []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.FixedWindow{}, algorithm.SlidingCounter{}, algorithm.LeakyBucket{}} {
		t.Run(alg.Name(), func(t *testing.T) {
			clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
			s := New(&Options{Clock: clock, MaxKeys: 1 << 20})
			defer s.Close()
			l, err := core.New(core.Config{
				Policy:    core.Policy{Name: "alloc", Limit: 10, Window: time.Second, MaxDelay: time.Second},
				Algorithm: alg, Store: s, Clock: clock,
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			ids := make([]string, 2000)
			for i := range ids {
				ids[i] = "id-" + strconv.Itoa(i)
			}
			if _, err := l.Allow(ctx, "one"); err != nil {
				t.Fatal(err)
			}
			expired := testing.AllocsPerRun(200, func() {
				clock.Advance(time.Hour) // every key has expired
				if _, err := l.Allow(ctx, "one"); err != nil {
					t.Fatal(err)
				}
			})
			i := 0
			fresh := testing.AllocsPerRun(1000, func() {
				i++
				if _, err := l.Allow(ctx, ids[i%len(ids)]); err != nil {
					t.Fatal(err)
				}
				if i%len(ids) == 0 {
					clock.Advance(time.Hour)
				}
			})
			if expired != 0 || fresh != 0 {
				t.Fatalf("allocations per decision: %v on an expired key, %v on new keys; want 0", expired, fresh)
			}
		})
	}
}
