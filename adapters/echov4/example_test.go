package echov4_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/sluicehq/sluice/adapters/echov4"
	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// An expensive endpoint costs 5 units of a 10-unit quota.
func ExampleMiddleware() {
	clock := core.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	store := memory.New(&memory.Options{Clock: clock})
	defer store.Close()
	quota, err := core.New(core.Config{
		Policy:    core.PerMinute("quota", 10),
		Algorithm: algorithm.FixedWindow{},
		Store:     store,
		Clock:     clock,
	})
	if err != nil {
		panic(err)
	}
	policy, err := nethttp.NewPolicy(nethttp.Config{Layers: []nethttp.Layer{{Limiter: quota, Weight: 5}}})
	if err != nil {
		panic(err)
	}
	e := echo.New()
	e.GET("/search", func(c echo.Context) error { return c.String(200, "results") }, echov4.Middleware(policy))

	for i := 0; i < 3; i++ {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/search", nil))
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 "quota";r=5;t=60
	// 200 "quota";r=0;t=60
	// 429 "quota";r=0;t=60
}
