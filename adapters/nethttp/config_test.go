package nethttp

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

func TestNewPolicyRejectsBadConfig(t *testing.T) {
	a := testLimiter(t, "a", 10, time.Minute)
	a2 := testLimiter(t, "a", 5, time.Second)
	one := func(q *Request) int64 { return 1 }
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no layers", Config{}, "Layers is empty"},
		{"nil limiter", Config{Layers: []Layer{{}}}, "Layers[0].Limiter is nil"},
		{"zero limiter", Config{Layers: []Layer{{Limiter: &core.Limiter{}}}}, "not made by core.New"},
		{"zero multi", Config{Layers: []Layer{{Multi: &core.Multi{}, Limits: core.MustLimits(core.Limit{Policy: core.PerSecond("x", 1), Algorithm: algorithm.GCRA{}})}}}, "not made by core.NewMulti"},
		{"duplicate policy name", Config{Layers: []Layer{{Limiter: a}, {Limiter: a2}}}, `"a" is used by two layers`},
		{"negative weight", Config{Layers: []Layer{{Limiter: a, Weight: -1}}}, "Weight -1 is outside 0..10"},
		{"weight above quota", Config{Layers: []Layer{{Limiter: a, Weight: 11}}}, "Weight 11 is outside 0..10"},
		{"weight and cost", Config{Layers: []Layer{{Limiter: a, Weight: 2, Cost: one}}}, "both Weight and Cost"},
		{"bad trusted proxy", Config{Layers: []Layer{{Limiter: a}}, TrustedProxies: []string{"10.0.0.0/33"}}, "TrustedProxies[0]"},
		{"trusted proxy not an address", Config{Layers: []Layer{{Limiter: a}}, TrustedProxies: []string{"proxy.internal"}}, "TrustedProxies[0]"},
		{"trusted proxy with zone", Config{Layers: []Layer{{Limiter: a}}, TrustedProxies: []string{"fe80::1%eth0"}}, "zone"},
		{"trusted mapped prefix", Config{Layers: []Layer{{Limiter: a}}, TrustedProxies: []string{"::ffff:10.0.0.0/104"}}, "IPv4 form"},
		{"unknown proxy header", Config{Layers: []Layer{{Limiter: a}}, ProxyHeader: "X-Real-IP"}, "ProxyHeader"},
		{"ipv4 prefix", Config{Layers: []Layer{{Limiter: a}}, IPv4Prefix: 33}, "IPv4Prefix 33"},
		{"ipv6 prefix", Config{Layers: []Layer{{Limiter: a}}, IPv6Prefix: -1}, "IPv6Prefix -1"},
		{"relative skip path", Config{Layers: []Layer{{Limiter: a}}, SkipPaths: []string{"healthz"}}, "SkipPaths[0]"},
		{"unclean skip path", Config{Layers: []Layer{{Limiter: a}}, SkipPaths: []string{"/x/../healthz"}}, "SkipPaths[0]"},
		{"double slash skip path", Config{Layers: []Layer{{Limiter: a}}, SkipPaths: []string{"/ok", "//healthz"}}, "SkipPaths[1]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPolicy(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewPolicy: %v, %v; want an error containing %q", p, err, c.want)
			}
		})
	}
}

func TestNewPolicyRejectsCostOnConcurrency(t *testing.T) {
	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	l, err := core.New(core.Config{
		Policy:    core.Policy{Name: "inflight", Limit: 2, Window: time.Minute},
		Algorithm: algorithm.Concurrency{},
		Store:     s,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPolicy(Config{Layers: []Layer{{Limiter: l, Weight: 2}}}); err == nil || !strings.Contains(err.Error(), "concurrency limit") {
		t.Fatalf("Weight on a concurrency layer: %v, want an error", err)
	}
	if _, err := NewPolicy(Config{Layers: []Layer{{Limiter: l}}}); err != nil {
		t.Fatalf("plain concurrency layer: %v", err)
	}
}

func TestNewPolicyAcceptsGoodConfig(t *testing.T) {
	p, err := NewPolicy(Config{
		Layers: []Layer{
			{Limiter: testLimiter(t, "per-ip", 100, time.Minute)},
			{Limiter: testLimiter(t, "per-key", 10, time.Second), Key: Header("X-Api-Key"), Weight: 10},
		},
		SkipPaths:      []string{"/healthz", "/debug/", "/"},
		TrustedProxies: []string{"10.0.0.0/8", "2001:db8::/32", "192.0.2.1", "::1"},
		ProxyHeader:    "FORWARDED",
		IPv4Prefix:     24,
		IPv6Prefix:     56,
		LegacyHeaders:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Layers(), ","); got != "per-ip,per-key" {
		t.Errorf("Layers() = %q", got)
	}
	if !p.forwarded || p.v4bits != 24 || p.v6bits != 56 || len(p.proxies) != 4 {
		t.Errorf("policy %+v", p)
	}
}

func TestSkipPaths(t *testing.T) {
	p := testPolicy(t, Config{SkipPaths: []string{"/healthz", "/debug/", "/"}})
	for path, want := range map[string]bool{
		"/healthz":          true,
		"/healthz/":         false,
		"/healthzx":         false,
		"/healthz/x":        false,
		"/debug/":           true,
		"/debug/pprof":      true,
		"/debug/pprof/":     true,
		"/debug":            false,
		"/debug/../admin":   false,
		"/healthz/../admin": false,
		"//healthz":         false,
		"/debug//pprof":     false,
		"/healthz/.":        false,
		"/./healthz":        false,
		"/api":              false,
		"/":                 true,
		"":                  false,
	} {
		if got := p.skipPath(path); got != want {
			t.Errorf("skipPath(%q) = %v, want %v", path, got, want)
		}
	}
	empty := testPolicy(t, Config{})
	if empty.skipPath("/healthz") {
		t.Error("a policy without SkipPaths skipped /healthz")
	}
	// A path is matched as the client sent it: a router that routes on the
	// escaped path (echo; net/http's ServeMux keeps %2F in a segment) would
	// serve "/debug%2Fx" or "/%68ealthz" elsewhere, unlimited, if the
	// decoded form matched. An escape the default encoding also makes
	// (a space) changes nothing. Escaped dots are dots: a file server or a
	// router that cleans the decoded path serves "/debug/%2e%2e/admin" as
	// "/admin", so it is limited.
	for target, want := range map[string]bool{
		"/debug%2Fanything":      false,
		"/%68ealthz":             false,
		"/debug/%2e%2e/admin":    false,
		"/debug/%2E%2E/admin":    false,
		"/debug/%2e/pprof":       false,
		"/debug/.%2e/admin":      false,
		"/debug/%2e%2e%2fadmin":  false,
		"/debug/%2e%2epprof":     true,
		"/debug/a%20b.css":       true,
		"/healthz":               true,
		"/debug/pprof?seconds=5": true,
	} {
		if got := p.skipRequest(httptest.NewRequest(http.MethodGet, target, nil)); got != want {
			t.Errorf("a request for %q: skipped %v, want %v", target, got, want)
		}
	}
}

// A file server mounted behind the limit serves "/public/%2e%2e/private.txt"
// as "/private.txt": that request is limited, not skipped as "/public/".
func TestSkipPathsEscapedDotsThroughAFileServer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "private.txt"), []byte("private"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := testPolicy(t, Config{
		Layers:    []Layer{{Limiter: testLimiter(t, "fs", 1, time.Minute)}},
		SkipPaths: []string{"/public/"},
	})
	h := Middleware(p)(http.FileServer(http.Dir(dir)))
	for i, target := range []string{"/private.txt", "/private.txt", "/public/%2e%2e/private.txt", "/public/%2E%2E/private.txt"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
		if want := map[bool]int{true: http.StatusOK, false: http.StatusTooManyRequests}[i == 0]; w.Code != want {
			t.Errorf("request %d, %q: %d %q; want %d", i+1, target, w.Code, w.Body.String(), want)
		}
	}
}
