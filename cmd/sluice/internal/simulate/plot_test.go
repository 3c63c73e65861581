package simulate

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/algorithm"
)

// The leaky bucket admits more than the limit in a window's length because
// it queues: its panel says how many admissions were delayed, and that
// they were delayed rather than over-admitted. Other panels say nothing of
// a queue.
func TestPanelTitleSaysTheQueueDelays(t *testing.T) {
	pat, err := PatternByName("boundary")
	if err != nil {
		t.Fatal(err)
	}
	lb := run(t, algorithm.LeakyBucket{}, "boundary")
	if lb.Delayed == 0 || lb.Delayed >= lb.Admitted {
		t.Fatalf("leaky bucket: %d of %d admissions delayed, want some but not all", lb.Delayed, lb.Admitted)
	}
	title := PanelTitle(lb, policy, pat)
	for _, want := range []string{"leaky-bucket", strconv.Itoa(lb.Delayed) + " queued", "delayed, not over-admitted"} {
		if !strings.Contains(title, want) {
			t.Errorf("leaky-bucket panel title %q lacks %q", title, want)
		}
	}
	sl := run(t, algorithm.SlidingLog{}, "boundary")
	if sl.Delayed != 0 {
		t.Errorf("sliding log: %d admissions delayed", sl.Delayed)
	}
	if title := PanelTitle(sl, policy, pat); strings.Contains(title, "queued") {
		t.Errorf("sliding-log panel title %q speaks of a queue", title)
	}
}
