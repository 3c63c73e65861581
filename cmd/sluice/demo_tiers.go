package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

type demoTenant struct{}

// tiers is the demo's third part: a tier table, one Multi for every
// tenant, each request decided under its tenant's plan (several limits at
// once, one RateLimit item each), and a free tenant refused by its daily
// limit until midnight in the plan's time zone.
func (d *demo) tiers(ctx context.Context) (bool, error) {
	s, closeStore, err := d.b.NewStore()
	if err != nil {
		return false, err
	}
	d.closers = append(d.closers, closeStore)
	zone, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		zone = time.UTC
	}
	second := func(n, burst int64) core.Limit {
		return core.Limit{Policy: core.Policy{Name: "second", Limit: n, Window: time.Second, Burst: burst}, Algorithm: algorithm.GCRA{}}
	}
	day := func(n int64) core.Limit {
		return core.Limit{Policy: core.Policy{Name: "day", Limit: n, Window: 24 * time.Hour}, Algorithm: algorithm.Calendar{Period: algorithm.Day, Location: zone}}
	}
	table := map[string][]core.Limit{
		"free":       {second(50, 50), day(20)},
		"pro":        {second(100, 200), day(10_000)},
		"enterprise": {second(1000, 2000), day(1_000_000)},
	}
	plans := map[string]string{"initech": "pro", "umbrella": "enterprise"}
	tiers, err := core.NewTiers(table, "free", func(_ context.Context, tenant string) (string, error) { return plans[tenant], nil })
	if err != nil {
		return false, err
	}
	m, err := core.NewMulti(core.MultiConfig{Name: "api", Store: s, Prefix: d.prefix + ":tiers", Timeout: 5 * time.Second,
		Observer: func(e core.Event) { d.noteStoreError(e.Err) }})
	if err != nil {
		return false, err
	}
	fmt.Fprintln(d.out, "Tiers: one Multi for every tenant; each request's limits come from its tenant's plan, all decided at once.")
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  tier\tper second\tper day ("+zone.String()+")\t")
	for _, name := range tiers.Names() {
		ls := tiers.Tier(name)
		sec, dy := ls.Limit(0).Policy, ls.Limit(1).Policy
		fmt.Fprintf(tw, "  %s\t%d (burst %d)\t%d\t\n", name, sec.Limit, sec.Capacity(), dy.Limit)
	}
	tw.Flush()
	policy, err := nethttp.NewPolicy(nethttp.Config{Layers: []nethttp.Layer{{Multi: m, Tiers: tiers, Key: nethttp.Identity(demoTenant{})}}})
	if err != nil {
		return false, err
	}
	tenant := "acme-" + randomHex(3) // a free tenant of its own, each run
	var last *httptest.ResponseRecorder
	admitted := 0
	for range 25 {
		r := httptest.NewRequest("GET", "/api", nil).WithContext(context.WithValue(ctx, demoTenant{}, tenant))
		w := httptest.NewRecorder()
		if a, ok := policy.Admit(w, r, "", nil); ok {
			a.Done()
			admitted++
		}
		last = w
	}
	fmt.Fprintf(d.out, "\nfree tenant %q sends 25 requests at once: %d admitted, then:\n", tenant, admitted)
	fmt.Fprintf(d.out, "  %d %s\n", last.Code, http.StatusText(last.Code))
	for _, h := range []string{"RateLimit-Policy", "RateLimit", "Retry-After"} {
		fmt.Fprintf(d.out, "  %s: %s\n", h, strings.Join(last.Header().Values(h), ", "))
	}
	if last.Code == http.StatusServiceUnavailable {
		// No limit refused it: the store could not decide.
		fmt.Fprintln(d.out, "  the store could not decide: no limit refused the request")
		return false, nil
	}
	ra := last.Header().Get("Retry-After")
	now := time.Now().In(zone)
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, zone)
	fmt.Fprintf(d.out, "  refused by the daily limit: retry at midnight in %s (%s from now)\n", zone, midnight.Sub(now).Round(time.Second))
	ok := admitted == 20 && last.Code == http.StatusTooManyRequests && ra != ""
	if !ok {
		fmt.Fprintf(d.out, "  FAIL: want 20 admitted and a 429 with Retry-After\n")
	}
	return ok, nil
}
