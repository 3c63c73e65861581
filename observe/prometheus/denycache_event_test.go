package prometheus

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/core"
)

// A refusal by core's deny cache is counted as a hit and as a denial; a
// refusal by the store is a denial only.
func TestDenyCacheHitsFromEvents(t *testing.T) {
	o, _ := newObserver(t, Options{})
	o.Observe(core.Event{Policy: "p", Op: "allow", Decision: core.Decision{Limit: 1}})
	o.Observe(core.Event{Policy: "p", Op: "allow", Decision: core.Decision{Limit: 1}, DenyCached: true})
	o.Observe(core.Event{Policy: "p", Op: "allow", Decision: core.Decision{Limit: 1}, DenyCached: true})
	if got := testutil.ToFloat64(o.denyHits.WithLabelValues("p")); got != 2 {
		t.Errorf("deny cache hits %v, want 2", got)
	}
	if got := testutil.ToFloat64(o.decisions.WithLabelValues("p", "denied")); got != 3 {
		t.Errorf("denials %v, want 3", got)
	}
}
