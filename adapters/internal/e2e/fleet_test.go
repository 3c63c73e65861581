package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/labstack/echo/v5"
	goredis "github.com/redis/go-redis/v9"
	sluiceecho "github.com/sluicehq/sluice/adapters/echo"
	sluicegin "github.com/sluicehq/sluice/adapters/gin"
	"github.com/sluicehq/sluice/adapters/nethttp"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/redis"
)

func init() {
	gin.SetMode(gin.ReleaseMode)
	// The store-down tests dial closed ports on purpose.
	goredis.SetLogger(quiet{})
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// instance is one member of the fleet.
type instance struct {
	name string
	url  string
}

// spec describes the one limit the fleet enforces.
type spec struct {
	alg     core.Algorithm
	policy  core.Policy
	prefix  string
	timeout time.Duration
	failure core.FailureMode
}

// prefix returns a key prefix no earlier run has used, so that tests
// sharing one redis-server never see each other's counters.
func prefix(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "e2e-" + hex.EncodeToString(b[:])
}

// newInstance builds one instance: its own client, store, limiter and
// policy, served by framework ("nethttp", "gin" or "echo") on loopback.
func newInstance(t *testing.T, framework string, addr string, sp spec) instance {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	st := redis.New(c, nil)
	t.Cleanup(func() {
		_ = st.Close()
		_ = c.Close()
	})
	l, err := core.New(core.Config{
		Policy: sp.policy, Algorithm: sp.alg, Store: st,
		Prefix: sp.prefix, Timeout: sp.timeout, Failure: sp.failure,
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := nethttp.NewPolicy(nethttp.Config{Layers: []nethttp.Layer{{Limiter: l}}})
	if err != nil {
		t.Fatal(err)
	}
	ok := func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(framework)) }
	var h http.Handler
	switch framework {
	case "nethttp":
		mux := http.NewServeMux()
		mux.Handle("GET /api", nethttp.Middleware(p)(http.HandlerFunc(ok)))
		h = mux
	case "gin":
		e := gin.New()
		e.GET("/api", sluicegin.Middleware(p), gin.WrapF(ok))
		h = e
	case "echo":
		e := echo.New()
		e.GET("/api", echo.WrapHandler(http.HandlerFunc(ok)), sluiceecho.Middleware(p))
		h = e
	default:
		t.Fatalf("unknown framework %q", framework)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return instance{name: framework, url: s.URL + "/api"}
}

// fleet starts the three instances.
func fleet(t *testing.T, addr string, sp spec) []instance {
	t.Helper()
	return []instance{
		newInstance(t, "nethttp", addr, sp),
		newInstance(t, "gin", addr, sp),
		newInstance(t, "echo", addr, sp),
	}
}
