package memory

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// A flood of identities fills the store; under FailOpen a full store must
// still decide a newcomer's requests, not hand them to the failure policy:
// "1 per hour" admits one, not every request.
func TestFloodUnderFailOpenKeepsTheLimit(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, MaxKeys: 1000})
	l, err := core.New(core.Config{Policy: core.Policy{Name: "api", Limit: 1, Window: time.Hour},
		Algorithm: algorithm.GCRA{}, Store: s, Clock: clock, Failure: core.FailOpen})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	floodDegraded := 0
	for i := range 5000 {
		d, err := l.Allow(ctx, "flood-"+strconv.Itoa(i))
		if err != nil || !d.Allowed {
			t.Fatalf("flood identity %d: %+v, %v; want admitted", i, d, err)
		}
		if d.Degraded {
			floodDegraded++
		}
		clock.Advance(time.Millisecond)
	}
	if floodDegraded != 0 {
		t.Errorf("%d of 5000 flood identities admitted by FailOpen, not decided by the store", floodDegraded)
	}
	admitted, degraded := 0, 0
	for range 100 {
		d, err := l.Allow(ctx, "newcomer")
		if err != nil {
			t.Fatalf("newcomer: %v", err)
		}
		if d.Allowed {
			admitted++
		}
		if d.Degraded {
			degraded++
		}
	}
	if admitted != 1 || degraded != 0 {
		t.Fatalf("a new identity in a full store under FailOpen: %d of 100 admitted, %d degraded; want 1 admitted, none degraded", admitted, degraded)
	}
	if n := s.Len(); n > 1000 {
		t.Errorf("Len = %d, above MaxKeys 1000", n)
	}
}
