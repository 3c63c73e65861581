package main

import (
	"strings"
	"testing"
)

// TestConformanceSaysWhySkipped: every check the suite skipped is printed
// on a line of its own with the suite's reason (the memory store has one
// clock, so the skewed-fleet check does not apply; GCRA holds no leases).
func TestConformanceSaysWhySkipped(t *testing.T) {
	code, out, errOut := sluice(t, "conformance", "--store", "memory", "--run", "gcra")
	wantCode(t, code, exitOK, out, errOut)
	for _, want := range []string{
		"generic/gcra/AdmissionSkewedFleet SKIP Capabilities.OneClock",
		"generic/gcra/InFlight SKIP gcra holds no leases",
	} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(strings.Join(strings.Fields(line), " "), want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line says %q:\n%s", want, out)
		}
	}
}

func TestParseSkips(t *testing.T) {
	out := []byte(`=== RUN   TestConformance/generic/gcra/AdmissionSkewedFleet
    run.go:50: Capabilities.OneClock: one clock
=== RUN   TestConformance/generic/gcra/Steps
=== RUN   TestConformance/script/concurrency
    run.go:40: concurrency has no Lua twin
--- PASS: TestConformance (0.02s)
            --- SKIP: TestConformance/generic/gcra/AdmissionSkewedFleet (0.00s)
            --- PASS: TestConformance/generic/gcra/Steps (0.00s)
        --- SKIP: TestConformance/script/concurrency (0.00s)
`)
	got := parseSkips(out)
	want := map[string]string{
		"generic/gcra/AdmissionSkewedFleet": "Capabilities.OneClock: one clock",
		"script/concurrency":                "concurrency has no Lua twin",
	}
	if len(got) != len(want) {
		t.Fatalf("parseSkips = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("parseSkips[%q] = %q, want %q", k, got[k], v)
		}
	}
}

// --run selects checks by name too: "Admission" names no algorithm, so it
// runs every algorithm's Admission check rather than nothing.
func TestConformanceRunSelectsChecks(t *testing.T) {
	code, out, errOut := sluice(t, "conformance", "--store", "memory", "--run", "Admission$", "-v")
	wantCode(t, code, exitOK, out, errOut)
	for _, want := range []string{"--- PASS: TestConformance/generic/gcra/Admission ", "--- PASS: TestConformance/generic/fixed-window/Admission "} {
		if !strings.Contains(out, want) {
			t.Errorf("--run Admission$ ran no %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "/Steps (") {
		t.Errorf("--run Admission$ ran other checks too:\n%s", out)
	}
}

// --run that names no algorithm and no check is a usage error, not a pass
// of nothing: a typo ("gcar") must not read as a whole suite passed. One
// that names a check run once per path (Retention) runs it alone.
func TestConformanceRunThatSelectsNothingIsAUsageError(t *testing.T) {
	for _, run := range []string{"nomatch", "gcar", "gcar/Admission"} {
		code, out, errOut := sluice(t, "conformance", "--store", "memory", "--run", run)
		wantCode(t, code, exitUsage, out, errOut)
		if !strings.Contains(errOut, "selects no check") {
			t.Errorf("--run %s: stderr %q, want it to say it selects no check", run, errOut)
		}
	}
	code, out, errOut := sluice(t, "conformance", "--store", "memory", "--run", "Retention", "-v")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "--- PASS: TestConformance/generic/Retention ") || strings.Contains(out, "/Admission (") {
		t.Errorf("--run Retention ran something else, or not it:\n%s", out)
	}
}
