package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The demo's third part: the tier table, and a free tenant refused by its
// daily limit with one RateLimit item per limit.
func TestDemoTiers(t *testing.T) {
	code, out, errOut := sluice(t, "demo", "--store", "memory", "--window", "1s")
	wantCode(t, code, exitOK, out, errOut)
	for _, want := range []string{
		"tier", "enterprise", "free", "pro", "per day (Europe/Berlin)",
		"sends 25 requests at once: 20 admitted", "429 Too Many Requests",
		`RateLimit-Policy: "second";q=50;w=1, "day";q=20;w=86400`, `"second";r=30;t=1, "day";r=0;t=`,
		"refused by the daily limit: retry at midnight",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// simulate --pool: the steady tenants keep their rate through the spike.
func TestSimulatePool(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pool.png")
	code, out, errOut := sluice(t, "simulate", "--pool", "--out", file)
	wantCode(t, code, exitOK, out, errOut)
	for _, want := range []string{"medium   spike        120", "large   spike         36          36", "small   spike         10          10", "wrote " + file} {
		if !strings.Contains(out, want) {
			t.Errorf("simulate --pool output lacks %q:\n%s", want, out)
		}
	}
}
