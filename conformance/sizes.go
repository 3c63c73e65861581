package conformance

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// The sizes check: the longest keys a Limiter names and the largest states
// an algorithm writes are kept whole. The other checks write keys of some
// 60 bytes and states of at most a few hundred, so a store that cuts a key
// or a value at a length past those (a column of 128 or 1,024 bytes)
// passes them, and then counts two policies on one key, or reads a log cut
// short as one with room.

// bigState is how many entries the sizes check puts in a state that grows
// with its entries (a sliding log's, a concurrency limit's leases): some
// 8 to 16 KB.
const bigState = 1000

// checkSizes: two policies whose names, 64 characters each under a prefix
// of 64, differ in their last character alone count apart, for one
// identity; and an algorithm whose state grows with its entries, filled
// with bigState of them one µs apart, refuses the next.
func checkSizes(t testing.TB, e *env) {
	s := e.stores[0]
	prefix := keyPrefix + strings.Repeat("-", core.MaxNameLen-len(keyPrefix))
	name := strings.Repeat("n", core.MaxNameLen-1)
	pa := core.Policy{Name: name + "a", Limit: 2, Window: time.Hour, MaxDelay: time.Microsecond, LeaseTTL: time.Hour}
	pb := pa
	pb.Name = name + "b"
	la, lb := e.limiterUnder(t, prefix, s, pa, nil), e.limiterUnder(t, prefix, s, pb, nil)
	id := identity(t, la)
	forget(t, lb, id)
	for i := range 2 {
		if d, _ := e.take(t, la, id, 1); !d.Allowed {
			t.Fatalf("%s: request %d of 2 under a policy of 64 characters refused", e.alg.Name(), i+1)
		}
	}
	if d, _ := e.take(t, lb, id, 1); !d.Allowed {
		t.Errorf("%s: OVER-COUNT: policy %q drained, and policy %q, whose name differs in its last character, refused its first request: the store cut the keys (%d and %d bytes) to one",
			e.alg.Name(), "…"+pa.Name[len(pa.Name)-4:], "…"+pb.Name[len(pb.Name)-4:], len(la.Key(id).String()), len(lb.Key(id).String()))
	}

	switch e.alg.Name() {
	case "sliding-log", "concurrency":
	default:
		return // a state of a few bytes, whatever it counts
	}
	clock := core.NewManualClock(epoch)
	p := core.Policy{Name: "big-state", Limit: bigState, Window: time.Hour, LeaseTTL: time.Hour}
	l := e.limiter(t, s, p, clock)
	big := identity(t, l)
	for i := range bigState {
		clock.Advance(time.Microsecond)
		if d, _ := e.take(t, l, big, 1); !d.Allowed {
			t.Fatalf("%s: request %d of %d refused, each a µs after the last", e.alg.Name(), i+1, bigState)
		}
	}
	clock.Advance(time.Microsecond)
	if d, _ := e.take(t, l, big, 1); d.Allowed {
		t.Errorf("%s: OVER-ADMISSION: %d admitted, then one more, under a limit of %d: the store cut a state of %d entries short", e.alg.Name(), bigState, bigState, bigState)
	}
}
