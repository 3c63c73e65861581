package memcache

import (
	"math"
	"testing"
	"time"
)

func TestExpiration(t *testing.T) {
	now := time.Date(2026, 3, 14, 15, 20, 0, 0, time.UTC)
	clock := func() (int64, bool) { return now.Unix(), true }
	unknown := func() (int64, bool) { return 0, false }
	unix := int32(now.Unix())
	const day = 24 * time.Hour
	for _, tc := range []struct {
		ttl, skew time.Duration
		at        func() (int64, bool)
		want      int32
	}{
		{-time.Hour, 0, clock, 2},      // may vanish at once: the shortest that ends
		{0, 0, clock, 2},               // never 0, which is "never"
		{time.Nanosecond, 0, clock, 2}, // rounded up to a second, plus the tick
		{time.Second, 0, clock, 2},     // whole seconds are not rounded
		{time.Second + 1, 0, clock, 3}, // ... anything more is
		{0, time.Second, clock, 2},     // the skew counts from zero
		{1500 * time.Millisecond, time.Second, clock, 4},
		{30*day - 2*time.Second, time.Second, clock, MaxRelativeExpiration},
		{30*day - time.Second, time.Second, clock, unix + MaxRelativeExpiration + 1 + absoluteSlack},
		{40 * day, 0, clock, unix + 40*86400 + 1 + absoluteSlack},
		{math.MaxInt64, math.MaxInt64, clock, math.MaxInt32},                     // no overflow; capped in 2038
		{40 * day, 0, func() (int64, bool) { return -5e9, true }, math.MaxInt32}, // a clock before 1970
		{40 * day, 0, unknown, MaxRelativeExpiration},                            // no server clock: 30 days, never the process clock
	} {
		if got := expiration(tc.ttl, tc.skew, tc.at); got != tc.want {
			now, known := tc.at()
			t.Errorf("expiration(%v, %v, server at %d (%v)) = %d, want %d", tc.ttl, tc.skew, now, known, got, tc.want)
		}
	}
}
