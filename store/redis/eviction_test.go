package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// setPolicy sets the server's maxmemory-policy, restored when the test ends.
func setPolicy(t *testing.T, admin *goredis.Client, policy string) {
	t.Helper()
	ctx := context.Background()
	old, err := admin.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.ConfigSet(context.Background(), "maxmemory-policy", old["maxmemory-policy"]) })
}

// wantWarning fails unless err is an eviction warning for policy.
func wantWarning(t *testing.T, err error, addr, policy string) {
	t.Helper()
	var w *core.EvictionWarning
	if !errors.Is(err, core.ErrEvictable) || !errors.As(err, &w) {
		t.Fatalf("got %v; want a *core.EvictionWarning matching core.ErrEvictable", err)
	}
	if w.Policy != policy || (addr != "" && w.Addr != addr) {
		t.Fatalf("warning for %s, policy %q; want %s, %q", w.Addr, w.Policy, addr, policy)
	}
}

// TestCheckEvictionPolicy: Check is quiet under noeviction and warns under
// every policy that can evict a limiter key (all keys have a TTL, so
// volatile-* can too).
func TestCheckEvictionPolicy(t *testing.T) {
	srv := startServer(t)
	s := New(goredis.NewClient(&goredis.Options{Addr: srv.addr}), nil)
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Check(ctxT(t)); err != nil {
		t.Fatalf("Check under noeviction = %v; want nil", err)
	}
	for _, p := range []string{"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-ttl"} {
		setPolicy(t, srv.admin, p)
		wantWarning(t, s.Check(ctxT(t)), srv.addr, p)
	}
}

// TestEvictionWarningAtStartup: a store built over a server that evicts
// says so by itself, without a decision or a Check.
func TestEvictionWarningAtStartup(t *testing.T) {
	srv := startServer(t, "--maxmemory-policy", "allkeys-lru")
	warns := make(chan error, 10)
	s := New(goredis.NewClient(&goredis.Options{Addr: srv.addr}), &Options{OnWarning: func(err error) { warns <- err }})
	t.Cleanup(func() { _ = s.Close() })
	select {
	case err := <-warns:
		wantWarning(t, err, srv.addr, "allkeys-lru")
	case <-time.After(5 * time.Second):
		t.Fatal("no warning 5 s after the store was built over an allkeys-lru server")
	}
}

// TestEvictionWarningPeriodic: a policy changed while the store runs is
// reported by the periodic check; decisions go on; Close ends the checks.
func TestEvictionWarningPeriodic(t *testing.T) {
	old := evictionCheckEvery
	evictionCheckEvery = 50 * time.Millisecond
	t.Cleanup(func() { evictionCheckEvery = old })
	srv := startServer(t)
	warns := make(chan error, 100)
	s := New(goredis.NewClient(&goredis.Options{Addr: srv.addr}), &Options{OnWarning: func(err error) { warns <- err }})
	lim, err := core.New(core.Config{Policy: core.Policy{Name: "evict", Limit: 5, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-warns:
		t.Fatalf("a warning under noeviction: %v", err)
	default:
	}
	setPolicy(t, srv.admin, "volatile-lfu")
	select {
	case err := <-warns:
		wantWarning(t, err, srv.addr, "volatile-lfu")
	case <-time.After(5 * time.Second):
		t.Fatal("no warning 5 s after the policy became volatile-lfu")
	}
	if d, err := lim.Allow(context.Background(), "a"); err != nil || !d.Allowed {
		t.Fatalf("a decision while the server may evict: %+v, %v; want it admitted", d, err)
	}
	_ = s.Close()
	time.Sleep(100 * time.Millisecond)
	for len(warns) > 0 {
		<-warns
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(warns); n != 0 {
		t.Fatalf("%d warnings after Close", n)
	}
}

// TestCheckConfigRenamed: where CONFIG is renamed away, the policy is
// unknown: Check says so, and the store decides as usual.
func TestCheckConfigRenamed(t *testing.T) {
	srv := startServer(t, "--rename-command", "CONFIG", "")
	warns := make(chan error, 10)
	s := New(goredis.NewClient(&goredis.Options{Addr: srv.addr}), &Options{OnWarning: func(err error) { warns <- err }})
	t.Cleanup(func() { _ = s.Close() })
	err := s.Check(ctxT(t))
	wantWarning(t, err, srv.addr, "unknown")
	var w *core.EvictionWarning
	if errors.As(err, &w); w.Err == nil {
		t.Fatalf("an unknown policy without a cause: %v", err)
	}
	select {
	case err := <-warns:
		wantWarning(t, err, srv.addr, "unknown")
	case <-time.After(5 * time.Second):
		t.Fatal("no warning at start-up where the policy cannot be read")
	}
	lim, err := core.New(core.Config{Policy: core.Policy{Name: "renamed", Limit: 5, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := lim.Allow(context.Background(), "a"); err != nil || !d.Allowed {
		t.Fatalf("a decision where CONFIG is renamed: %+v, %v", d, err)
	}
}

// TestCheckCluster: Check reads every master of the cluster (the shared
// cluster runs noeviction, and is only read).
func TestCheckCluster(t *testing.T) {
	s := newClusterStore(t, nil)
	if err := s.Check(ctxT(t)); err != nil {
		t.Fatalf("Check on a noeviction cluster = %v", err)
	}
}

// TestEvictionWarningOnReconnect: a new connection of the store's own
// client (here after the server dropped every client) brings the check
// forward, long before the periodic one.
func TestEvictionWarningOnReconnect(t *testing.T) {
	oldEvery, oldGap := evictionCheckEvery, reconnectCheckGap
	evictionCheckEvery, reconnectCheckGap = time.Hour, 0
	t.Cleanup(func() { evictionCheckEvery, reconnectCheckGap = oldEvery, oldGap })
	srv := startServer(t)
	warns := make(chan error, 10)
	s := New(goredis.NewClient(&goredis.Options{Addr: srv.addr}), &Options{OnWarning: func(err error) { warns <- err }})
	t.Cleanup(func() { _ = s.Close() })
	lim, err := core.New(core.Config{Policy: core.Policy{Name: "reconnect", Limit: 5, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := lim.Allow(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the start-up check is done
	setPolicy(t, srv.admin, "allkeys-lru")
	if err := srv.admin.ClientKillByFilter(ctx, "TYPE", "normal").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50 && len(warns) == 0; i++ {
		_, _ = lim.Allow(ctx, "a") // the first may meet the dropped connection
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-warns:
		wantWarning(t, err, srv.addr, "allkeys-lru")
	case <-time.After(5 * time.Second):
		t.Fatal("no warning after the store reconnected to a server that now evicts")
	}
}
