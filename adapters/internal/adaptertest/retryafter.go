package adaptertest

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// aligned is a time on a whole minute (and second), so that a fixed window
// of a minute starts at it.
var aligned = time.Unix(1_699_999_980, 0)

// testLayeredRetryAfter: when a later layer refuses a request, an earlier
// layer that admitted it but has no room left will refuse the retry, so
// Retry-After must wait for it too. Per-ip 4 per minute, then per-key 3 per
// 3 s: the 4th request drains per-ip and is refused by per-key. A client
// that obeys Retry-After must be admitted then, and a client that retries
// sooner must never be told to wait past the first Retry-After.
func testLayeredRetryAfter(t *testing.T, h Harness) {
	for _, c := range []struct {
		name string
		alg  core.Algorithm
		// exact: the per-ip layer frees its first unit exactly when its
		// quota is whole again (a window algorithm), so Retry-After is
		// exactly 60 and a retry a second sooner is refused.
		exact bool
	}{
		{"FixedWindow", algorithm.FixedWindow{}, true},
		{"SlidingLog", algorithm.SlidingLog{}, true},
		{"SlidingCounter", algorithm.SlidingCounter{}, false},
		{"TokenBucket", algorithm.TokenBucket{}, false},
		{"GCRA", algorithm.GCRA{}, false},
	} {
		t.Run("ExhaustedEarlierLayer/"+c.name, func(t *testing.T) {
			clock := core.NewManualClock(aligned)
			get := layeredServer(t, h, clock,
				Clocked(t, clock, c.alg, core.Policy{Name: "per-ip", Limit: 4, Window: time.Minute}))
			for i := 0; i < 3; i++ {
				if r := get(); r.Status != http.StatusOK {
					t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
				}
			}
			r := get()
			ra := CheckDenied(t, r, "per-key")
			items := List(t, r.Header, "RateLimit")
			ip, _ := Find(items, "per-ip")
			if v, _ := ip.Int("r"); v != 0 {
				t.Errorf("per-ip r=%d after four requests, want 0", v)
			}
			// t is when per-ip's quota is whole again: a minute at least
			// after four units, never cut to the other layer's wait.
			if v, _ := ip.Int("t"); v < 60 {
				t.Errorf("per-ip t=%d, want at least 60 (RateLimit %q)", v, r.Header.Values("RateLimit"))
			}
			key, _ := Find(items, "per-key")
			if v, _ := key.Int("t"); v != 3 {
				t.Errorf("per-key t=%d, want 3", v)
			}
			if c.exact && ra != 60 {
				t.Errorf("Retry-After %d, want 60: per-ip has no unit left until then", ra)
			}
			// A client that retries after per-key's own 3 s is refused
			// (per-ip is still empty) and must not learn that the first
			// Retry-After was too short.
			clock.Advance(3 * time.Second)
			r = get()
			if r.Status != http.StatusTooManyRequests {
				t.Fatalf("retry after 3 s: %d, want 429 (per-ip has no unit)", r.Status)
			}
			ra2 := CheckDenied(t, r, "per-ip")
			if 3+ra2 > ra {
				t.Errorf("refused after 3 s with Retry-After %d: the first Retry-After %d was too short by %d s", ra2, ra, 3+ra2-ra)
			}
			if c.exact {
				clock.Advance(time.Duration(ra-3-1) * time.Second)
				if r := get(); r.Status != http.StatusTooManyRequests {
					t.Errorf("retry a second before Retry-After: %d, want 429", r.Status)
				}
				clock.Advance(time.Second)
			} else {
				clock.Advance(time.Duration(ra-3) * time.Second)
			}
			if r := get(); r.Status != http.StatusOK {
				t.Errorf("retry after Retry-After %d s: %d %s, want 200", ra, r.Status, r.Body)
			}
		})
	}
	// A layer that still has room does not hold the retry back, and its t
	// is its own reset, not the refusing layer's wait.
	t.Run("RoomInEarlierLayer", func(t *testing.T) {
		clock := core.NewManualClock(aligned)
		get := layeredServer(t, h, clock,
			Clocked(t, clock, algorithm.FixedWindow{}, core.Policy{Name: "per-ip", Limit: 100, Window: time.Minute}))
		for i := 0; i < 3; i++ {
			if r := get(); r.Status != http.StatusOK {
				t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
			}
		}
		r := get()
		if ra := CheckDenied(t, r, "per-key"); ra != 3 {
			t.Errorf("Retry-After %d, want 3 (per-ip has room)", ra)
		}
		ip, _ := Find(List(t, r.Header, "RateLimit"), "per-ip")
		if v, _ := ip.Int("r"); v != 96 {
			t.Errorf("per-ip r=%d, want 96", v)
		}
		if v, _ := ip.Int("t"); v != 60 {
			t.Errorf("per-ip t=%d, want 60: its window ends in a minute (RateLimit %q)", v, r.Header.Values("RateLimit"))
		}
		clock.Advance(3 * time.Second)
		if r := get(); r.Status != http.StatusOK {
			t.Errorf("retry after Retry-After 3 s: %d %s, want 200", r.Status, r.Body)
		}
	})
}

// layeredServer serves GET /api limited by perIP (by client address), then
// per-key, 3 per 3 s by the user, both on clock; get sends one request as
// one user.
func layeredServer(t *testing.T, h Harness, clock core.Clock, perIP *core.Limiter) func() Response {
	t.Helper()
	perKey := Clocked(t, clock, algorithm.SlidingLog{}, core.Policy{Name: "per-key", Limit: 3, Window: 3 * time.Second})
	// NoRefund: the refused request's units stay taken at per-ip, so the
	// retry must wait for it (with refunds, per-ip gets them back).
	p := Policy(t, nethttp.Config{Layers: []nethttp.Layer{
		{Limiter: perIP},
		{Limiter: perKey, Key: nethttp.Identity(h.UserKey)},
	}, NoRefund: true})
	srv := Server(t, h.Mount(t, []Route{{Method: "GET", Path: "/api", Policy: p, Handler: func(w http.ResponseWriter, r *http.Request) {}}}), nil)
	return func() Response { return Do(t, srv.Client(), "GET", srv.URL+"/api", UserHeader, "dana") }
}
