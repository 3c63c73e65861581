package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

// chi (like gorilla/mux, httprouter's net/http mode, or the standard
// library's ServeMux) takes net/http middleware as it is: the nethttp
// middleware needs no adapter. Here it guards one route group, served on a
// real loopback socket.
func Example_chi() {
	// A manual clock at the top of an hour keeps the output the same.
	clock := core.NewManualClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	store := memory.New(&memory.Options{Clock: clock})
	defer store.Close()
	perIP, err := core.New(core.Config{
		Policy:    core.Policy{Name: "per-ip", Limit: 2, Window: time.Hour},
		Algorithm: algorithm.FixedWindow{},
		Store:     store,
		Clock:     clock,
	})
	if err != nil {
		panic(err)
	}
	limit, err := nethttp.New(nethttp.Config{Layers: []nethttp.Layer{{Limiter: perIP}}})
	if err != nil {
		panic(err)
	}

	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	r.Group(func(r chi.Router) {
		r.Use(limit) // chi's Use takes func(http.Handler) http.Handler
		r.Get("/items/{id}", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "item %s", chi.URLParam(r, "id"))
		})
	})

	srv := httptest.NewServer(r)
	defer srv.Close()
	for _, path := range []string{"/items/1", "/items/2", "/items/3", "/healthz"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode, resp.Header.Get("RateLimit"), string(body) != "")
	}
	// Output:
	// /items/1 200 "per-ip";r=1;t=3600 true
	// /items/2 200 "per-ip";r=0;t=3600 true
	// /items/3 429 "per-ip";r=0;t=3600 true
	// /healthz 200  true
}
