package simulate

import (
	"bytes"
	"container/heap"
	"image/png"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

var policy = core.Policy{Name: "sim", Limit: 10, Window: time.Second}

func run(t *testing.T, alg core.Algorithm, pattern string) Result {
	t.Helper()
	pat, err := PatternByName(pattern)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(alg, policy, pat, 10*time.Second, 1)
	if err != nil {
		t.Fatalf("%s/%s: %v", alg.Name(), pattern, err)
	}
	if r.Admitted+r.Rejected != r.Offered {
		t.Fatalf("%s/%s: admitted %d + rejected %d != offered %d", alg.Name(), pattern, r.Admitted, r.Rejected, r.Offered)
	}
	return r
}

// The boundary pattern shows what each algorithm is for: the fixed window
// admits both bursts (twice the limit inside one window's length), the
// sliding log never more than the limit.
func TestBoundaryBurst(t *testing.T) {
	fw := run(t, algorithm.FixedWindow{}, "boundary")
	if fw.WorstBurst != 2*policy.Limit {
		t.Errorf("fixed window worst burst = %d, want %d (the boundary double burst)", fw.WorstBurst, 2*policy.Limit)
	}
	sl := run(t, algorithm.SlidingLog{}, "boundary")
	if sl.WorstBurst > policy.Limit {
		t.Errorf("sliding log worst burst = %d, above the limit %d", sl.WorstBurst, policy.Limit)
	}
}

func TestEveryAlgorithmEveryPattern(t *testing.T) {
	for _, alg := range algorithm.All() {
		for _, pat := range Patterns {
			r := run(t, alg, pat.Name)
			if r.Admitted == 0 || r.Offered == 0 {
				t.Errorf("%s/%s: admitted %d of %d", alg.Name(), pat.Name, r.Admitted, r.Offered)
			}
			switch alg.(type) {
			case algorithm.SlidingLog:
				if r.WorstBurst > policy.Limit {
					t.Errorf("%s/%s: worst burst %d above the limit", alg.Name(), pat.Name, r.WorstBurst)
				}
			case algorithm.FixedWindow, algorithm.SlidingCounter:
				if r.WorstBurst > 2*policy.Limit {
					t.Errorf("%s/%s: worst burst %d above twice the limit", alg.Name(), pat.Name, r.WorstBurst)
				}
			}
			if pat.Name == "tenants" && alg.Name() != "concurrency" {
				// Each tenant has its own key: the light ones, at half the
				// limit, are never starved by the heavy one.
				if r.PerTenant["light-1"] == 0 || r.PerTenant["heavy"] <= r.PerTenant["light-1"] {
					t.Errorf("%s/tenants: per tenant %v", alg.Name(), r.PerTenant)
				}
			}
		}
	}
}

func TestRetryStormRetries(t *testing.T) {
	r := run(t, algorithm.GCRA{}, "retry-storm")
	base, _ := PatternByName("retry-storm")
	first := len(base.Build(policy, 10*time.Second, 1))
	if r.Offered <= first {
		t.Fatalf("offered %d, first arrivals %d: denials were not retried", r.Offered, first)
	}
}

func TestWritePNG(t *testing.T) {
	var results []Result
	pat, _ := PatternByName("boundary")
	for _, alg := range algorithm.All() {
		results = append(results, run(t, alg, "boundary"))
	}
	var buf bytes.Buffer
	if err := WritePNG(&buf, results, policy, pat, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	w, h := PlotSize(len(results))
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("PNG is %dx%d, want %dx%d", b.Dx(), b.Dy(), w, h)
	}
}

func TestWorstBurst(t *testing.T) {
	s := []time.Duration{0, 100, 200, 1000, 1001, 1002, 1003}
	if got := worstBurst(s, 1000); got != 6 {
		t.Fatalf("worstBurst = %d, want 6 (100 .. 1003 lie in (3, 1003])", got)
	}
}

// The event queue gives the earliest event first and, of events at one
// instant, the one pushed first: the order the runs' results depend on.
func TestEventQueueOrder(t *testing.T) {
	q := &eventQueue{}
	for i, at := range []time.Duration{5, 1, 5, 3, 1, 5} {
		q.push(event{at: at, retry: i})
	}
	var got []int
	for q.Len() > 0 {
		got = append(got, heap.Pop(q).(event).retry)
	}
	if want := []int{1, 4, 3, 0, 2, 5}; !slices.Equal(got, want) {
		t.Errorf("events came in push order %v, want %v", got, want)
	}
}
