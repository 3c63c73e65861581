package simulate

import (
	"bytes"
	"image/png"
	"testing"
	"time"

	"github.com/sluicehq/sluice/region"
)

func TestRegionsModesKeepTheirBounds(t *testing.T) {
	sc := DefaultRegions(100, time.Second)
	got := map[region.Mode]RegionsResult{}
	for _, mode := range []region.Mode{region.Static, region.Synced, region.Slack} {
		r, err := RunRegions(mode, sc)
		if err != nil {
			t.Fatal(err)
		}
		for w, a := range r.Admitted {
			var total int64
			for _, x := range a {
				total += x
			}
			if total > r.Bound {
				t.Errorf("%s, window %d: admitted %d > bound %d", mode, w, total, r.Bound)
			}
		}
		got[mode] = r
	}
	if s := got[region.Slack]; s.Worst <= sc.Limit {
		t.Errorf("slack: worst window %d, want above the limit with two regions asking", s.Worst)
	}
	if sy, st := got[region.Synced], got[region.Static]; sy.Utilization <= st.Utilization {
		t.Errorf("synced utilization %.2f not above static's %.2f", sy.Utilization, st.Utilization)
	}
	var buf bytes.Buffer
	if err := WriteRegionsPNG(&buf, []RegionsResult{got[region.Static], got[region.Synced], got[region.Slack]}, sc); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&buf); err != nil {
		t.Fatal(err)
	}
}
