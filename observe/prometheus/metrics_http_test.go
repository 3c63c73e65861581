package prometheus

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serve runs a real /metrics endpoint for reg on loopback and returns its
// URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/metrics"
}

// scrape GETs url as Prometheus would (text format) and returns the body.
func scrape(t *testing.T, url string) []byte {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d, %v\n%s", resp.StatusCode, err, body)
	}
	return body
}

// samples reads a text exposition into series → value.
func samples(t *testing.T, body []byte) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

// The proof: a scripted run, scraped over HTTP from a real /metrics
// endpoint, gives exact counts, and promtool accepts the exposition.
func TestScrapeAfterScriptedRun(t *testing.T) {
	o, reg := newObserver(t, Options{})
	mem := scriptedRun(t, o)
	sc, err := NewStoreCollector("", "memory", mem)
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(sc)
	o.SetFallbackActive("open", true)
	o.BreakerStateChanged("redis", "closed")
	o.BreakerStateChanged("redis", "open")
	o.DenyCacheHit("api")

	body := scrape(t, serve(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	got := samples(t, body)
	want := map[string]float64{
		`sluice_decisions_total{outcome="allowed",policy="api"}`:           10,
		`sluice_decisions_total{outcome="denied",policy="api"}`:            2,
		`sluice_decisions_total{outcome="degraded",policy="api"}`:          0,
		`sluice_decisions_total{outcome="error",policy="api"}`:             0,
		`sluice_near_limit_total{policy="api"}`:                            2,
		`sluice_deny_cache_hits_total{policy="api"}`:                       1,
		`sluice_decisions_total{outcome="allowed",policy="dark"}`:          5,
		`sluice_decisions_total{outcome="denied",policy="dark"}`:           0,
		`sluice_shadow_refusals_total{policy="dark"}`:                      3,
		`sluice_near_limit_total{policy="dark"}`:                           1,
		`sluice_decisions_total{outcome="degraded",policy="open"}`:         3,
		`sluice_unknown_outcomes_total{policy="open"}`:                     3,
		`sluice_fallback_active{policy="open"}`:                            1,
		`sluice_fallback_active{policy="api"}`:                             0,
		`sluice_decisions_total{outcome="error",policy="closed"}`:          2,
		`sluice_unknown_outcomes_total{policy="closed"}`:                   2,
		`sluice_decisions_total{outcome="allowed",policy="slots"}`:         1,
		`sluice_decisions_total{outcome="denied",policy="slots"}`:          1,
		`sluice_near_limit_total{policy="slots"}`:                          1,
		`sluice_release_errors_total{policy="slots"}`:                      0,
		`sluice_shadow_refusals_total{policy="api"}`:                       0,
		`sluice_store_evictions_total{store="memory"}`:                     1,
		`sluice_breaker_state{breaker="redis",state="open"}`:               1,
		`sluice_breaker_state{breaker="redis",state="closed"}`:             0,
		`sluice_breaker_state{breaker="redis",state="half-open"}`:          0,
		`sluice_breaker_transitions_total{breaker="redis",state="open"}`:   1,
		`sluice_breaker_transitions_total{breaker="redis",state="closed"}`: 0, // the initial state is no change
		// Timed store calls only: the memory store's decisions (api, dark,
		// slots) are not store calls.
		`sluice_store_call_duration_seconds_count{op="allow",policy="open"}`:            3,
		`sluice_store_call_duration_seconds_count{op="allow",policy="closed"}`:          2,
		`sluice_store_call_duration_seconds_count{op="acquire",policy="slots"}`:         0,
		`sluice_store_call_duration_seconds_count{op="release",policy="slots"}`:         0,
		`sluice_store_call_duration_seconds_count{op="allow",policy="api"}`:             0,
		`sluice_store_call_duration_seconds_bucket{op="allow",policy="open",le="+Inf"}`: 3,
	}
	for series, w := range want {
		if g, ok := got[series]; !ok || g != w {
			t.Errorf("%s = %v (present %v); want %v", series, g, ok, w)
		}
	}
	// The four outcomes account for every decision: 12+5+3+2+2.
	var total float64
	for series, v := range got {
		if strings.HasPrefix(series, "sluice_decisions_total{") {
			total += v
		}
	}
	if total != 24 {
		t.Errorf("decisions in all: %v; want 24", total)
	}
	for series := range got {
		if strings.Contains(series, "alice") || strings.Contains(series, "bob") {
			t.Errorf("an identity reached a label: %s", series)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}

	checkMetrics(t, body)
}

// checkMetrics feeds an exposition to `promtool check metrics`.
func checkMetrics(t *testing.T, body []byte) {
	t.Helper()
	cmd := exec.Command(promtool(t), "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
