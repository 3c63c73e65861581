package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// checkReset: on a store.Deleter, Reset from one instance deletes the key
// that another instance filled, so the next request meets the whole quota
// (and, with an Inspector, the key is gone); Reset of an absent key is not
// an error. On any other store Reset reports core.ErrUnsupported.
func checkReset(t testing.TB, e *env) {
	p := core.Policy{Name: "reset", Limit: 3, Window: time.Hour, Burst: 3, LeaseTTL: time.Hour}
	clock := core.NewManualClock(epoch)
	fleet := e.fleet(t, p, clock, clock)
	id := identity(t, fleet[0])
	ctx := t.Context()
	if _, ok := e.stores[0].(store.Deleter); !ok {
		if err := fleet[1].Reset(ctx, id); !errors.Is(err, core.ErrUnsupported) {
			t.Errorf("%s: the store is not a store.Deleter, yet Reset returned %v, want core.ErrUnsupported", e.alg.Name(), err)
		}
		return
	}
	if err := fleet[1].Reset(ctx, id); err != nil {
		t.Errorf("%s: Reset of a key never written: %v", e.alg.Name(), err)
	}
	q := fleet[0].Quota()
	for i := range q {
		if d, _ := e.take(t, fleet[0], id, 1); !d.Allowed {
			t.Fatalf("%s: request %d of %d on a fresh key was denied: %+v", e.alg.Name(), i+1, q, d)
		}
	}
	if d, _ := e.take(t, fleet[0], id, 1); d.Allowed {
		t.Fatalf("%s: %d requests admitted with a quota of %d", e.alg.Name(), q+1, q)
	}
	if err := fleet[1].Reset(ctx, id); err != nil {
		t.Fatalf("%s: Reset: %v", e.alg.Name(), err)
	}
	if insp, ok := e.h.(Inspector); ok {
		if found, err := insp.Exists(ctx, fleet[0].Key(id)); err != nil || found {
			t.Errorf("%s: after Reset, Exists = %v, %v; want false", e.alg.Name(), found, err)
		}
	}
	want := serial(e.alg, p, clock.Now(), 1, int(q)+1)
	for i, w := range want {
		if got, _ := e.take(t, fleet[i%2], id, 1); got != w {
			t.Fatalf("%s: after Reset, request %d decided %+v; on a fresh key it decides %+v", e.alg.Name(), i+1, got, w)
		}
	}
}
