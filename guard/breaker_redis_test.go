package guard_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/guard"
	"github.com/sluicehq/sluice/internal/testenv"
	sredis "github.com/sluicehq/sluice/store/redis"
)

// A Limiter or a Multi over a breaker's store takes the paths it takes over
// the store itself: on Redis, a refund's script and the multi-limit script
// with one key per limit. Otherwise an instance that adds a breaker would
// keep its multi-limit counters under other keys than the instances
// without one, and the fleet would admit the limit once per kind of
// instance; and Charge would return no Receipt.
func TestBreakerKeepsTheScriptPathsOfRedis(t *testing.T) {
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	raw := sredis.New(c, nil)
	t.Cleanup(func() { raw.Close() })
	guarded := guard.NewBreaker(raw, nil).Store()
	prefix := "breaker-paths-" + time.Now().Format("150405.000000")
	t.Cleanup(func() {
		keys, _ := c.Keys(ctx, prefix+":*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})

	t.Run("Charge", func(t *testing.T) {
		l, err := core.New(core.Config{Policy: core.PerMinute("charge", 5), Algorithm: algorithm.GCRA{}, Store: guarded, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		d, r, err := l.Charge(ctx, "client", 2)
		if err != nil || !d.Allowed {
			t.Fatalf("Charge: %+v, %v; want an admission", d, err)
		}
		if r == nil {
			t.Fatal("Charge behind a breaker returned no Receipt; over the Redis store itself it returns one")
		}
		// GCRA refunds what the clock has not given back meanwhile: 1 or 2.
		if k, err := r.Refund(ctx, 2); err != nil || k < 1 {
			t.Fatalf("Refund(2) = %d, %v; want a unit or two back", k, err)
		}
	})

	t.Run("MultiThroughTheBreaker", func(t *testing.T) {
		// A server that is gone: the multi-limit script's failures open
		// the breaker, which then refuses without asking the store.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		dc := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { dc.Close() })
		br := guard.NewBreaker(sredis.New(dc, nil), nil)
		m, err := core.NewMulti(core.MultiConfig{Name: "mm", Store: br.Store(), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		two := core.MustLimits(
			core.Limit{Policy: core.PerSecond("sec", 5), Algorithm: algorithm.GCRA{}},
			core.Limit{Policy: core.Policy{Name: "day", Limit: 4, Window: 24 * time.Hour}, Algorithm: algorithm.FixedWindow{}})
		for i := range guard.DefaultConsecutiveFailures {
			if _, _, err := m.Allow(ctx, "tenant", two, nil); err == nil || errors.Is(err, guard.ErrOpen) {
				t.Fatalf("decision %d on a dead server: %v; want the store's error", i+1, err)
			}
		}
		if br.State() != guard.Open {
			t.Fatalf("breaker %v after %d failed multi-limit decisions, want open", br.State(), guard.DefaultConsecutiveFailures)
		}
		if _, _, err := m.Allow(ctx, "tenant", two, nil); !errors.Is(err, guard.ErrOpen) {
			t.Fatalf("a decision with the breaker open: %v; want ErrOpen", err)
		}
	})

	t.Run("Multi", func(t *testing.T) {
		day := core.MustLimits(core.Limit{Policy: core.Policy{Name: "day", Limit: 4, Window: 24 * time.Hour}, Algorithm: algorithm.FixedWindow{}})
		plain, err := core.NewMulti(core.MultiConfig{Name: "mm", Store: raw, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		behind, err := core.NewMulti(core.MultiConfig{Name: "mm", Store: guarded, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		admitted := 0
		for i := range 8 {
			m := plain
			if i%2 == 1 {
				m = behind
			}
			d, _, err := m.Allow(ctx, "tenant", day, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				admitted++
			}
		}
		if admitted != 4 {
			t.Fatalf("two instances, one behind a breaker, admitted %d of 8 on a limit of 4", admitted)
		}
	})
}
