package valkey_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// setPolicy sets the server's maxmemory-policy, restored when the test ends.
func setPolicy(t *testing.T, admin valkeygo.Client, policy string) {
	t.Helper()
	ctx := context.Background()
	old, err := admin.Do(ctx, admin.B().ConfigGet().Parameter("maxmemory-policy").Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	set := func(p string) error {
		return admin.Do(context.Background(), admin.B().ConfigSet().ParameterValue().ParameterValue("maxmemory-policy", p).Build()).Error()
	}
	if err := set(policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set(old["maxmemory-policy"]) })
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

func ctx5s(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestCheckEvictionPolicy: Check is quiet under noeviction and warns under
// every policy that can evict a limiter key (all keys have a TTL, so
// volatile-* can too).
func TestCheckEvictionPolicy(t *testing.T) {
	srv := startServer(t)
	s := valkey.New(srv.client(t), nil)
	if err := s.Check(ctx5s(t)); err != nil {
		t.Fatalf("Check under noeviction = %v; want nil", err)
	}
	for _, p := range []string{"allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-ttl"} {
		setPolicy(t, srv.admin, p)
		wantWarning(t, s.Check(ctx5s(t)), srv.addr, p)
	}
}

// TestEvictionWarningAtStartup: a store built over a server that evicts
// says so by itself, without a decision or a Check.
func TestEvictionWarningAtStartup(t *testing.T) {
	srv := startServer(t, "--maxmemory-policy", "allkeys-lru")
	warns := make(chan error, 10)
	s := valkey.New(srv.client(t), &valkey.Options{OnWarning: func(err error) { warns <- err }})
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
	t.Cleanup(valkey.SetEvictionCheckEvery(50 * time.Millisecond))
	srv := startServer(t)
	warns := make(chan error, 100)
	s := valkey.New(srv.client(t), &valkey.Options{OnWarning: func(err error) { warns <- err }})
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
	s := valkey.New(srv.client(t), &valkey.Options{OnWarning: func(err error) { warns <- err }})
	t.Cleanup(func() { _ = s.Close() })
	err := s.Check(ctx5s(t))
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

// TestCheckCluster: Check reads every node of the cluster (the shared
// cluster runs noeviction, and is only read).
func TestCheckCluster(t *testing.T) {
	s, _ := newStore(t, backends[1].addrs(t))
	if err := s.Check(ctx5s(t)); err != nil {
		t.Fatalf("Check on a noeviction cluster = %v", err)
	}
}
