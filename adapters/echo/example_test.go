package echo_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v5"
	sluiceecho "github.com/sluicehq/sluice/adapters/echo"
	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// One quota for a whole route (nethttp.Route), whoever calls it and
// whatever the id: at most two reports a minute are built.
func ExampleMiddleware() {
	clock := core.NewManualClock(time.Date(2030, 1, 1, 12, 0, 30, 0, time.UTC))
	store := memory.New(&memory.Options{Clock: clock})
	defer store.Close()
	reports, err := core.New(core.Config{
		Policy:    core.PerMinute("reports", 2),
		Algorithm: algorithm.FixedWindow{},
		Store:     store,
		Clock:     clock,
	})
	if err != nil {
		panic(err)
	}
	policy, err := nethttp.NewPolicy(nethttp.Config{Layers: []nethttp.Layer{
		{Limiter: reports, Key: nethttp.Route},
	}})
	if err != nil {
		panic(err)
	}
	e := echo.New()
	e.GET("/reports/:id", func(c *echo.Context) error { return c.String(200, "report") }, sluiceecho.Middleware(policy))

	for _, path := range []string{"/reports/1", "/reports/2", "/reports/3"} {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		fmt.Printf("%s %d %s retry-after=%q\n", path, w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// /reports/1 200 "reports";r=1;t=30 retry-after=""
	// /reports/2 200 "reports";r=0;t=30 retry-after=""
	// /reports/3 429 "reports";r=0;t=30 retry-after="30"
}
