package simulate

import (
	"strconv"
	"strings"
	"testing"
	"time"

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

// A panel's line has at most maxPoints points, however long the run, and
// each keeps the highest count of the samples it stands for: a day of
// traffic drew 1.7 million points a panel (1.2 GB to draw), and a
// coarser sampling alone would step over a boundary burst.
func TestWindowSeriesIsBoundedAndKeepsPeaks(t *testing.T) {
	const window = time.Second
	d := 24 * time.Hour
	// One burst of 30 at 12:00:00.5, and one start a second elsewhere.
	var starts []time.Duration
	for s := time.Duration(0); s < d; s += time.Second {
		starts = append(starts, s)
		if s == 12*time.Hour {
			for range 30 {
				starts = append(starts, s+500*time.Millisecond)
			}
		}
	}
	pts := windowSeries(starts, window, d)
	if len(pts) > maxPoints+1 {
		t.Fatalf("%d points for a day, want at most %d", len(pts), maxPoints+1)
	}
	peak := 0.0
	for _, p := range pts {
		peak = max(peak, p.Y)
	}
	if peak != 31 {
		t.Errorf("the line's highest point is %v, want the burst's 31 in its window", peak)
	}
	// A short run keeps its window/20 sampling: 10 s at 1 s, 201 points.
	if n := len(windowSeries(starts[:10], window, 10*time.Second)); n != 201 {
		t.Errorf("10 s: %d points, want 201 (one each 50 ms)", n)
	}
}

// The line reaches the worst window the title states: a peak between two
// samples (here at 0.99 s, gone by the sample at 1 s) is drawn at its
// instant.
func TestWindowSeriesReachesThePeakBetweenSamples(t *testing.T) {
	starts := []time.Duration{0}
	for range 10 {
		starts = append(starts, 990*time.Millisecond)
	}
	peak := 0.0
	for _, p := range windowSeries(starts, time.Second, 2*time.Second) {
		peak = max(peak, p.Y)
	}
	if peak != 11 {
		t.Errorf("the line's highest point is %v, want 11 (all 11 starts within the window ending at 0.99 s)", peak)
	}
}
