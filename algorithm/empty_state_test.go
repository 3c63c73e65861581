package algorithm

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// An empty state with capacity, as the memory store hands over for a new or
// expired key so that the step can write in place, decides exactly as nil.
func TestEmptyStateIsAbsent(t *testing.T) {
	p := core.Policy{Name: "empty", Limit: 5, Window: time.Second, MaxDelay: time.Second, LeaseTTL: time.Second}
	const now = 1_700_000_000_000_000
	for _, alg := range All() {
		for _, n := range []int64{1, 3, alg.Quota(&p)} {
			var want, got []byte
			var wd, gd core.Decision
			var wttl, gttl time.Duration
			if l, ok := alg.(core.Leaser); ok {
				want, wttl, wd = l.Acquire(nil, now, 7, &p)
				got, gttl, gd = l.Acquire(make([]byte, 0, 64), now, 7, &p)
			} else {
				want, wttl, wd = alg.Step(nil, now, n, &p)
				got, gttl, gd = alg.Step(make([]byte, 0, 64), now, n, &p)
			}
			if !bytes.Equal(got, want) || gttl != wttl || gd != wd {
				t.Errorf("%s, n=%d: an empty state gives %x %v %+v, nil gives %x %v %+v", alg.Name(), n, got, gttl, gd, want, wttl, wd)
			}
		}
	}
}
