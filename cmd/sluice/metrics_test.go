package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// --metrics serves the run's decisions at /metrics while it runs.
func TestMetricsEndpoint(t *testing.T) {
	var out bytes.Buffer
	ms, err := startMetrics("127.0.0.1:0", &out)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.stop()
	s := memory.New(nil)
	defer s.Close()
	l, err := core.New(core.Config{Policy: core.Policy{Name: "bench", Limit: 2, Window: time.Hour},
		Algorithm: algorithm.GCRA{}, Store: s, Observer: ms.observer()})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Allow(context.Background(), "client"); err != nil {
			t.Fatal(err)
		}
	}
	url := strings.TrimSpace(strings.TrimPrefix(out.String(), "metrics at "))
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`sluice_decisions_total{outcome="allowed",policy="bench"} 2`,
		`sluice_decisions_total{outcome="denied",policy="bench"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	if ms, err := startMetrics("", &out); ms != nil || err != nil || ms.observer() != nil {
		t.Errorf("no --metrics: %v, %v; want no server and no observer", ms, err)
	}
}

func TestMetricsBadAddress(t *testing.T) {
	code, out, errOut := sluice(t, "bench", "--store", "memory", "--duration", "100ms", "--metrics", "256.0.0.1:1")
	wantCode(t, code, exitUsage, out, errOut)
}

// The demo's limiters report to --metrics: a run counts its decisions there.
func TestDemoServesMetrics(t *testing.T) {
	code, out, errOut := sluice(t, "demo", "--store", "memory", "--window", "1s", "--metrics", "127.0.0.1:0")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "metrics at http://127.0.0.1:") {
		t.Fatalf("the demo does not say where its metrics are:\n%s", out)
	}
}
