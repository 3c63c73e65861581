package gin_test

import (
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"
	sluicegin "github.com/sluicehq/sluice/adapters/gin"
	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// Two uploads a minute per user, the user being what the application's
// authentication middleware stored with c.Set.
func ExampleMiddleware() {
	clock := core.NewManualClock(time.Date(2030, 1, 1, 12, 0, 50, 0, time.UTC))
	store := memory.New(&memory.Options{Clock: clock})
	defer store.Close()
	uploads, err := core.New(core.Config{
		Policy:    core.PerMinute("uploads", 2),
		Algorithm: algorithm.FixedWindow{},
		Store:     store,
		Clock:     clock,
	})
	if err != nil {
		panic(err)
	}
	policy, err := nethttp.NewPolicy(nethttp.Config{Layers: []nethttp.Layer{
		{Limiter: uploads, Key: nethttp.Identity("user")},
	}})
	if err != nil {
		panic(err)
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	authenticate := func(c *gin.Context) { c.Set("user", c.GetHeader("Authorization")) }
	r.POST("/upload", authenticate, sluicegin.Middleware(policy), func(c *gin.Context) { c.String(201, "stored") })

	for _, user := range []string{"alice", "alice", "alice", "bob"} {
		req := httptest.NewRequest("POST", "/upload", nil)
		req.Header.Set("Authorization", user)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Printf("%s %d %s retry-after=%q\n", user, w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// alice 201 "uploads";r=1;t=10 retry-after=""
	// alice 201 "uploads";r=0;t=10 retry-after=""
	// alice 429 "uploads";r=0;t=10 retry-after="10"
	// bob 201 "uploads";r=1;t=10 retry-after=""
}
