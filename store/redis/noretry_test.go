package redis

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// countScript counts its own executions in its key.
var countScript = store.NewScript("test-count", `redis.call('INCR', KEYS[1])
return {1, 0, 0, 0, 0, 0}`)

// stallTimeout is the user's ReadTimeout in these tests: the time after
// which go-redis gives up on a stalled reply (and, by default, re-sends).
// The users' clients speak RESP2 without CLIENT SETINFO, so that a new
// connection sends nothing before its first command and a re-send reaches
// the server even through a stalled proxy.
const stallTimeout = 200 * time.Millisecond

func runs(t *testing.T, admin goredis.UniversalClient, key store.Key) int64 {
	t.Helper()
	n, err := admin.Get(context.Background(), key.String()).Int64()
	if errors.Is(err, goredis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatalf("reading the run count: %v", err)
	}
	return n
}

// checkRunOnce checks one RunScript whose reply was lost: it ran at most
// once, and if it ran, its error says the outcome is unknown.
func checkRunOnce(t *testing.T, admin goredis.UniversalClient, key store.Key, err error) {
	t.Helper()
	n := runs(t, admin, key)
	switch {
	case err == nil && n != 1:
		t.Errorf("%s: a decision without error, but the script ran %d times", key.Identity, n)
	case err == nil:
	case !errors.Is(err, core.ErrUnavailable):
		t.Errorf("%s: error %v does not match core.ErrUnavailable", key.Identity, err)
	case n > 1:
		t.Errorf("%s: the script ran %d times for one call", key.Identity, n)
	case n == 1 && !errors.Is(err, core.ErrOutcomeUnknown):
		t.Errorf("%s: the script ran, but the error %v does not say the outcome is unknown", key.Identity, err)
	}
}

// TestLostReplyRunsOnce: a proxy forwards commands to a real redis-server
// and drops the replies, so go-redis times out after the script ran. The
// user's client has go-redis's default MaxRetries (3), which re-sends the
// script; through the store, each call runs it at most once.
func TestLostReplyRunsOnce(t *testing.T) {
	addr := testenv.RedisAddr(t)
	admin := userClient(t)
	if err := admin.ScriptLoad(context.Background(), countScript.Source).Err(); err != nil {
		t.Fatal(err)
	}
	user := func(p *proxy) *goredis.Client {
		c := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ReadTimeout: stallTimeout, Protocol: 2, DisableIdentity: true})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	t.Run("the trap: go-redis alone re-sends", func(t *testing.T) {
		p := newProxy(t, addr)
		c := user(p)
		key := testKey(t, admin)
		p.Stall()
		err := c.EvalSha(ctxT(t), countScript.Hash, []string{key.String()}).Err()
		if err == nil {
			t.Fatal("no error through a stalled proxy")
		}
		if n := runs(t, admin, key); n < 2 {
			t.Fatalf("go-redis ran the script %d time(s): the proxy does not reproduce the re-send this test guards against", n)
		}
	})

	for _, tc := range []struct {
		name string
		opts *Options
	}{{"direct", &Options{NoBatch: true}}, {"batched", &Options{Pipelines: 1, MaxBatch: 4}}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProxy(t, addr)
			s := New(user(p), tc.opts)
			t.Cleanup(func() { _ = s.Close() })
			p.Stall()
			const calls = 12
			keys := make([]store.Key, calls)
			errs := make([]error, calls)
			var wg sync.WaitGroup
			for i := range calls {
				keys[i] = testKey(t, admin)
				wg.Go(func() {
					_, errs[i] = s.RunScript(ctxT(t), countScript, keys[i], store.ScriptArgs{N: 1})
				})
			}
			wg.Wait()
			ran := 0
			for i := range calls {
				checkRunOnce(t, admin, keys[i], errs[i])
				ran += int(runs(t, admin, keys[i]))
			}
			if ran == 0 {
				t.Fatal("no call reached the server: the test proves nothing")
			}
		})
	}
}

// TestLostReplyRunsOnceCluster is TestLostReplyRunsOnce on the real cluster,
// each node behind a proxy of its own (the user's client dials through
// them). The cluster client's own loop re-sends after a timeout.
func TestLostReplyRunsOnceCluster(t *testing.T) {
	addrs := testenv.RedisClusterAddrs(t)
	admin := userCluster(t)
	if err := admin.ForEachMaster(context.Background(), func(ctx context.Context, c *goredis.Client) error {
		return c.ScriptLoad(ctx, countScript.Source).Err()
	}); err != nil {
		t.Fatal(err)
	}
	user := func() (*goredis.ClusterClient, []*proxy) {
		via := map[string]string{}
		var ps []*proxy
		for _, a := range addrs {
			p := newProxy(t, a)
			via[a] = p.Addr()
			ps = append(ps, p)
		}
		c := goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs:           addrs,
			ReadTimeout:     stallTimeout,
			Protocol:        2,
			DisableIdentity: true,
			Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if pa, ok := via[addr]; ok {
					addr = pa
				}
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
		})
		t.Cleanup(func() { _ = c.Close() })
		if err := c.Ping(ctxT(t)).Err(); err != nil { // loads the slot map
			t.Fatal(err)
		}
		return c, ps
	}
	stall := func(ps []*proxy) {
		for _, p := range ps {
			p.Stall()
		}
	}

	t.Run("the trap: go-redis alone re-sends", func(t *testing.T) {
		c, ps := user()
		key := testKey(t, admin)
		stall(ps)
		if err := c.EvalSha(ctxT(t), countScript.Hash, []string{key.String()}).Err(); err == nil {
			t.Fatal("no error through stalled proxies")
		}
		if n := runs(t, admin, key); n < 2 {
			t.Fatalf("go-redis ran the script %d time(s): the proxies do not reproduce the re-send this test guards against", n)
		}
	})

	for _, tc := range []struct {
		name string
		opts *Options
	}{{"direct", &Options{NoBatch: true}}, {"batched", &Options{Pipelines: 1, MaxBatch: 4}}} {
		t.Run(tc.name, func(t *testing.T) {
			c, ps := user()
			s := New(c, tc.opts)
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Client().Ping(ctxT(t)).Err(); err != nil {
				t.Fatal(err)
			}
			stall(ps)
			const calls = 12
			keys := make([]store.Key, calls)
			errs := make([]error, calls)
			var wg sync.WaitGroup
			for i := range calls {
				keys[i] = testKey(t, admin)
				wg.Go(func() {
					_, errs[i] = s.RunScript(ctxT(t), countScript, keys[i], store.ScriptArgs{N: 1})
				})
			}
			wg.Wait()
			ran := 0
			for i := range calls {
				checkRunOnce(t, admin, keys[i], errs[i])
				ran += int(runs(t, admin, keys[i]))
			}
			if ran == 0 {
				t.Fatal("no call reached the server: the test proves nothing")
			}
		})
	}
}
