package prometheus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/memcache"
)

// Against a real memcached: the compare-and-swap counters the store
// reports reach the scrape, with the decisions and store call timings.
func TestScrapeMemcacheCAS(t *testing.T) {
	addr := testenv.MemcacheAddrs(t)[0]
	c := gomemcache.New(addr)
	c.Timeout = 2 * time.Second
	t.Cleanup(func() { c.Close() })
	s := memcache.New(c, nil)
	t.Cleanup(func() { s.Close() })

	o, reg := newObserver(t, Options{})
	sc, err := NewStoreCollector("", "memcache", s)
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(sc)
	var b [8]byte
	rand.Read(b[:])
	l := newLimiter(t, core.Config{
		Policy:    core.Policy{Name: "mc", Limit: 4, Window: time.Minute},
		Algorithm: algorithm.TokenBucket{}, Store: s, Prefix: "obs" + hex.EncodeToString(b[:]),
		Timeout: 2 * time.Second, Observer: o.Observe,
	})
	ctx := context.Background()
	for range 6 { // one at a time: no swap meets another writer
		if _, err := l.Allow(ctx, "frank"); err != nil {
			t.Fatal(err)
		}
	}
	got := samples(t, scrape(t, serve(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))))
	for series, want := range map[string]float64{
		`sluice_decisions_total{outcome="allowed",policy="mc"}`:            4,
		`sluice_decisions_total{outcome="denied",policy="mc"}`:             2,
		`sluice_store_call_duration_seconds_count{op="allow",policy="mc"}`: 6,
		`sluice_cas_updates_total{store="memcache"}`:                       6,
		`sluice_cas_attempts_total{store="memcache"}`:                      6,
		`sluice_cas_conflicts_total{store="memcache"}`:                     0,
		`sluice_cas_contention_total{store="memcache"}`:                    0,
	} {
		if g, ok := got[series]; !ok || g != want {
			t.Errorf("%s = %v (present %v); want %v", series, g, ok, want)
		}
	}
}
