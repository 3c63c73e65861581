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
	// Nor a check run once per path, nor a group of them (Multi) whose
	// subtests it left out, which printed as a row that PASSed.
	for _, other := range []string{"/Retention (", "/Expiry (", "TestConformance/generic/Multi "} {
		if strings.Contains(out, other) {
			t.Errorf("--run Admission$ ran %q too:\n%s", other, out)
		}
	}
	// An algorithm whose only selected check skipped is no PASS: its row
	// says SKIP, and the failures section (none here) lists no skip.
	code, out, errOut = sluice(t, "conformance", "--store", "memory", "--run", "InFlight")
	wantCode(t, code, exitOK, out, errOut)
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "gcra" && f[1] != "SKIP" {
			t.Errorf("--run InFlight: the row %q, want gcra SKIP (it holds no leases):\n%s", line, out)
		}
	}
}

// The failures section lists what failed, not the reasons of the checks
// that skipped.
func TestPrintFailuresLeavesOutSkips(t *testing.T) {
	out := []byte(`=== RUN   TestConformance/generic/gcra/InFlight
    run.go:51: gcra holds no leases
=== RUN   TestConformance/generic/gcra/Admission
    admission.go:99: OVER-ADMISSION: 3 of 2
--- FAIL: TestConformance (0.02s)
            --- SKIP: TestConformance/generic/gcra/InFlight (0.00s)
            --- FAIL: TestConformance/generic/gcra/Admission (0.00s)
`)
	var b strings.Builder
	printFailures(&b, out)
	if strings.Contains(b.String(), "holds no leases") || !strings.Contains(b.String(), "OVER-ADMISSION") {
		t.Errorf("failures:\n%s\nwant the failure and not the skip's reason", b.String())
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

// --run takes a regexp's top-level alternatives, each selecting what it
// names: two algorithms, or a check of each algorithm and a check run
// once per path.
func TestConformanceRunTakesAlternatives(t *testing.T) {
	code, out, errOut := sluice(t, "conformance", "--store", "memory", "--run", "gcra|token-bucket")
	wantCode(t, code, exitOK, out, errOut)
	for _, alg := range []string{"gcra", "token-bucket"} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == alg {
				found = true
			}
		}
		if !found {
			t.Errorf("--run gcra|token-bucket: no row for %s:\n%s", alg, out)
		}
	}
	code, out, errOut = sluice(t, "conformance", "--store", "memory", "--run", "Admission$|Retention", "-v")
	wantCode(t, code, exitOK, out, errOut)
	for _, want := range []string{"--- PASS: TestConformance/generic/gcra/Admission ", "--- PASS: TestConformance/generic/Retention "} {
		if !strings.Contains(out, want) {
			t.Errorf("--run Admission$|Retention ran no %s:\n%s", want, out)
		}
	}
	code, out, errOut = sluice(t, "conformance", "--store", "memory", "--run", "gcra|gcar")
	wantCode(t, code, exitUsage, out, errOut)
}
