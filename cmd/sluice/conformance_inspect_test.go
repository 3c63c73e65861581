package main

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The command looks into the network stores it opens: Expiry runs (it
// needs an Inspector) on Redis, Valkey and memcached, and LongTTL (a
// TTLInspector) on Redis and Valkey; on memcached, whose TTL gomemcache
// cannot read, and on memory, they skip, saying so.
func TestConformanceLooksIntoTheStore(t *testing.T) {
	redis := testenv.RedisAddr(t)
	for _, c := range []struct {
		url          string
		expiry, long bool
	}{
		{"redis://" + redis, true, true},
		{"valkey://" + redis, true, true},
		{"memcache://" + testenv.MemcacheAddrs(t)[0], true, false},
		{"memory", false, false},
	} {
		code, out, errOut := sluice(t, "conformance", "--store", c.url, "--run", "Expiry|LongTTL", "-v")
		wantCode(t, code, exitOK, out, errOut)
		for check, runs := range map[string]bool{"Expiry": c.expiry, "LongTTL": c.long} {
			passed := strings.Contains(out, "--- PASS: TestConformance/generic/"+check+" ")
			if passed != runs {
				t.Errorf("%s: %s passed %v, want %v:\n%s", c.url, check, passed, runs, out)
			}
		}
	}
}
