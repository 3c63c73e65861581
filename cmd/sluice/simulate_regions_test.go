package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/cmd/sluice/internal/simulate"
)

func TestSimulateRegionsWritesThreePanels(t *testing.T) {
	file := filepath.Join(t.TempDir(), "regions.png")
	code, out, errOut := sluice(t, "simulate", "--regions", "--out", file)
	wantCode(t, code, exitOK, out, errOut)
	for _, want := range []string{"static: worst window", "synced: worst window", "slack: worst window", "(bound 100)", "(bound 300)", "wrote " + file} {
		if !strings.Contains(out, want) {
			t.Errorf("simulate --regions output lacks %q:\n%s", want, out)
		}
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", file, err)
	}
	w, h := simulate.RegionsPlotSize(3)
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("plot is %dx%d, want %dx%d (three panels side by side)", b.Dx(), b.Dy(), w, h)
	}
}

func TestSimulateRegionsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--limit", "5"}, "--limit must be 12 to 100000"},
		{[]string{"--duration", "3s"}, "--duration must be 10 to 1000 windows"},
		{[]string{"--sync-period", "2s"}, "--sync-period must be"},
		{[]string{"--window", "0s"}, "Window"},
		// The flags the user set, not the fields of region.Config they
		// become, and nothing on stdout before the error.
		{[]string{"--window", "4ms"}, "--window 4ms is too short for --regions without --sync-period"},
		{[]string{"--window", "401h"}, "--window must be at most 100h with --regions"},
		{[]string{"--window", "5ms", "--sync-period", "999us"}, "--sync-period must be at least 1ms"},
	} {
		code, out, errOut := sluice(t, append([]string{"simulate", "--regions", "--out", ""}, tc.args...)...)
		wantCode(t, code, exitUsage, out, errOut)
		if !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%v: stderr %q, want %q; stdout %q, want none", tc.args, errOut, tc.want, out)
		}
	}
}

// A long window's rates are printed in a unit that shows them: 100 hours
// asked "0/s".
func TestSimulateRegionsLongWindowRates(t *testing.T) {
	code, out, errOut := sluice(t, "simulate", "--regions", "--out", "", "--window", "100h")
	wantCode(t, code, exitOK, out, errOut)
	if strings.Contains(out, " 0/s") || !strings.Contains(out, "/h") {
		t.Errorf("rates of a 100h window not shown per hour:\n%s", out)
	}
}

// A --duration that is not a whole number of windows (or of steps) runs:
// its last window is simulated in part.
func TestSimulateRegionsPartWindow(t *testing.T) {
	for _, args := range [][]string{
		{"--duration", "10.5s"},
		{"--window", "999ms", "--duration", "10s"},
		{"--window", "4.999ms", "--sync-period", "1ms", "--duration", "2s"},
	} {
		code, out, errOut := sluice(t, append([]string{"simulate", "--regions", "--out", ""}, args...)...)
		wantCode(t, code, exitOK, out, errOut)
	}
}
