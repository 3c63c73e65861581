package adaptertest

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// UserHeader carries the user a test request is authenticated as. The
// harness's authentication step reads it and stores the user under
// Harness.UserKey the framework's own way.
const UserHeader = "X-Test-User"

// Route is one route of the application under test.
type Route struct {
	Method string
	// Path in gin/echo syntax ("/items/:id"); a net/http harness turns
	// ":id" into "{id}".
	Path string
	// Policy limits the route; nil means no limiting.
	Policy *nethttp.Policy
	// Handler is the application's handler.
	Handler http.HandlerFunc
}

// Harness mounts routes on one framework.
type Harness struct {
	// Mount returns the application: for each route, an authentication
	// step (UserHeader to UserKey, when the header is present), then the
	// adapter's middleware for Route.Policy, then Route.Handler.
	Mount func(t *testing.T, routes []Route) http.Handler
	// UserKey is the key the authentication step stores the user under,
	// for nethttp.Identity.
	UserKey any
}

// Server starts h on loopback. Panics that reach the top of the handler
// are counted in panics (net/http would log them and drop the connection)
// and answered with status 599, which no adapter ever writes.
func Server(t testing.TB, h http.Handler, panics *atomic.Int64) *httptest.Server {
	t.Helper()
	top := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if panics != nil {
					panics.Add(1)
				}
				w.WriteHeader(599)
			}
		}()
		h.ServeHTTP(w, r)
	})
	s := httptest.NewUnstartedServer(top)
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// Limiter returns a limiter of alg over a fresh memory store.
func Limiter(t testing.TB, alg core.Algorithm, p core.Policy) *core.Limiter {
	t.Helper()
	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	return newLimiter(t, core.Config{Policy: p, Algorithm: alg, Store: s})
}

// Window is Limiter for a sliding log of limit per window: exactly limit
// admissions in any trailing window, with no window boundary that a test
// could straddle (a fixed window would reset under a test that crossed
// one, and admit more than its limit).
func Window(t testing.TB, name string, limit int64, window time.Duration) *core.Limiter {
	t.Helper()
	return Limiter(t, algorithm.SlidingLog{}, core.Policy{Name: name, Limit: limit, Window: window})
}

// Clocked is Limiter with both the limiter and its memory store reading
// clock, so a test moves time instead of sleeping.
func Clocked(t testing.TB, clock core.Clock, alg core.Algorithm, p core.Policy) *core.Limiter {
	t.Helper()
	s := memory.New(&memory.Options{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { _ = s.Close() })
	return newLimiter(t, core.Config{Policy: p, Algorithm: alg, Store: s, Clock: clock})
}

func newLimiter(t testing.TB, cfg core.Config) *core.Limiter {
	t.Helper()
	l, err := core.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Down is a store that cannot decide: every Update fails with a store
// error, as a network store does when its server is gone.
type Down struct{ calls atomic.Int64 }

var errRefused = errors.New("connection refused")

// Update fails.
func (d *Down) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	d.calls.Add(1)
	return &store.Error{Op: "update", Err: errRefused}
}

// Calls is how many updates were attempted.
func (d *Down) Calls() int64 { return d.calls.Load() }

// DownLimiter is a fixed-window limiter over a store that is down, with
// the failure mode given.
func DownLimiter(t testing.TB, name string, mode core.FailureMode) *core.Limiter {
	t.Helper()
	return newLimiter(t, core.Config{
		Policy:    core.Policy{Name: name, Limit: 10, Window: time.Minute},
		Algorithm: algorithm.FixedWindow{},
		Store:     &Down{},
		Failure:   mode,
	})
}

// Policy is nethttp.NewPolicy, failing the test on an error.
func Policy(t testing.TB, cfg nethttp.Config) *nethttp.Policy {
	t.Helper()
	p, err := nethttp.NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
