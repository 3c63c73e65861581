package client_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// A client that fails fast once the server's quota is spent: the third
// request is never sent, and the error says how long to wait.
func ExampleTransport() {
	// The server: Sluice's middleware, two requests an hour per client.
	clock := core.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	st := memory.New(&memory.Options{Clock: clock})
	defer st.Close()
	l, _ := core.New(core.Config{Policy: core.Policy{Name: "api", Limit: 2, Window: time.Hour},
		Algorithm: algorithm.FixedWindow{}, Store: st, Clock: clock})
	mw, _ := nethttp.New(nethttp.Config{Layers: []nethttp.Layer{{Limiter: l}}})
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	defer srv.Close()

	hc := &http.Client{Transport: &client.Transport{FailFast: true}}
	for range 3 {
		resp, err := hc.Get(srv.URL)
		var le *client.LimitedError
		switch {
		case errors.As(err, &le):
			fmt.Printf("not sent: policy %s, next in %v\n", le.Policy, le.Wait.Round(time.Hour))
		case err != nil:
			fmt.Println(err)
		default:
			resp.Body.Close()
			fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
	// Output:
	// 200 "api";r=1;t=3600
	// 200 "api";r=0;t=3600
	// not sent: policy api, next in 1h0m0s
}
