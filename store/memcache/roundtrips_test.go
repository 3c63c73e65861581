package memcache_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// TestRoundTrips: an uncontended decision costs exactly two round trips, a
// gets and then an add (new key) or a cas; a denial, which writes nothing,
// costs one gets. Counted on the wire by a proxy in front of the real
// server.
func TestRoundTrips(t *testing.T) {
	addr := firstServer(t)
	for _, alg := range []core.Algorithm{algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.FixedWindow{}} {
		t.Run(alg.Name(), func(t *testing.T) {
			p := startProxy(t, addr)
			s := newStore(t, nil, p.addr())
			clock := core.NewManualClock(time.Date(2026, 3, 14, 15, 20, 0, 0, time.UTC))
			l := newLimiter(t, s, alg, core.Policy{Name: "rt", Limit: 2, Window: time.Hour}, clock)
			id := uniqueKey(t).Identity
			for i, want := range []struct {
				allowed        bool
				gets, add, cas int
			}{
				{true, 1, 1, 0},  // new key: gets (miss), add
				{true, 1, 0, 1},  // gets, cas
				{false, 1, 0, 0}, // denied: gets only
				{false, 1, 0, 0},
			} {
				d, err := l.Allow(context.Background(), id)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				got := fmt.Sprint(d.Allowed, p.take("gets"), p.take("add"), p.take("cas"))
				if w := fmt.Sprint(want.allowed, want.gets, want.add, want.cas); got != w {
					t.Errorf("call %d: allowed, gets, adds, cas = %s; want %s", i, got, w)
				}
			}
			if st := s.Stats(); st.Attempts[1] != 4 || st.Conflicts != 0 {
				t.Errorf("stats: %d updates of one attempt, %d conflicts; want 4 and 0", st.Attempts[1], st.Conflicts)
			}
			// Reset is one delete.
			if err := l.Reset(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			if n := p.take("delete"); n != 1 {
				t.Errorf("Reset sent %d deletes, want 1", n)
			}
		})
	}
}
