package region

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// An aligned hold ends where the window algorithms' window ends: windows
// counted from the Unix epoch, as FixedWindow counts them, not from the
// zero time of package time, which differs by 62,135,596,800 s, a whole
// number of windows only for some (a second, a minute, a day; not 7 s, nor
// a week).
func TestAlignedHoldEndsWithTheAlgorithmsWindow(t *testing.T) {
	for _, w := range []time.Duration{time.Second, 700 * time.Millisecond, 7 * time.Second, 11 * time.Second, 7 * 24 * time.Hour} {
		r := &Region{aligned: w, period: 100 * time.Millisecond}
		p := core.Policy{Name: "w", Limit: 10, Window: w}
		for _, at := range []time.Time{time.Unix(1_800_000_003, 250_000_000), time.Unix(1_700_000_000, 300_000)} {
			_, _, d := algorithm.FixedWindow{}.Step(nil, at.UnixMicro(), 1, &p)
			end := at.Add(d.ResetAfter) // the end of the window that holds at
			if got, want := r.heldUntil(held{until: at}), end.Add(r.period); !got.Equal(want) {
				t.Errorf("window %v, enforced until %v: held until %v, want the window's end %v plus a period", w, at.UTC(), got.UTC(), want.UTC())
			}
		}
	}
}
