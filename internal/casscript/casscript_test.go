package casscript

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

func TestPXMillis(t *testing.T) {
	for _, tt := range []struct {
		ttl  time.Duration
		want int64
	}{
		{-time.Second, 1}, {0, 1}, {time.Nanosecond, 1}, {time.Microsecond, 1},
		{time.Millisecond, 1}, {time.Millisecond + 1, 2}, {1500 * time.Microsecond, 2},
		{time.Hour, 3_600_000}, {core.MaxWindow, int64(core.MaxWindow / time.Millisecond)},
	} {
		if got := PXMillis(tt.ttl); got != tt.want {
			t.Errorf("PXMillis(%v) = %d, want %d", tt.ttl, got, tt.want)
		}
	}
}
