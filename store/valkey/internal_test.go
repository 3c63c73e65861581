package valkey

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

func TestArgv(t *testing.T) {
	var c argCache
	p := core.Policy{Name: "p", Limit: 7, Window: 3 * time.Second, Burst: 11, MaxDelay: time.Second, LeaseTTL: 5 * time.Second}
	a := core.NewScriptArgs(&p, 1_700_000_000_000_001, 4)
	a.Lease, a.Op = 1<<64-1, store.OpRelease
	want := [10]string{"1700000000000001", "4", "7", "3000000", "11", "428572", "1000000", "5000000", "18446744073709551615", "1"}
	all := store.NewScript("all", "return 0")
	for range 2 { // a miss, then a hit
		var got [10]string
		c.argv(all, &a, got[:0])
		if got != want {
			t.Fatalf("argv = %q, want %q", got, want)
		}
	}
	// A script that declares fewer arguments gets those, in its order.
	some := store.NewScript("some", "return 0", store.ArgInterval, store.ArgNow, store.ArgLease)
	if got := c.argv(some, &a, nil); !slices.Equal(got, []string{"428572", "1700000000000001", "18446744073709551615"}) {
		t.Fatalf("argv of %v = %q", some.Args, got)
	}
}

// TestArgCacheBounded: past maxCachedPolicies the cache stops growing, and
// arguments are still right.
func TestArgCacheBounded(t *testing.T) {
	var c argCache
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range maxCachedPolicies + 100 {
				a := store.ScriptArgs{Limit: int64(i), Window: int64(g)}
				v := c.get(&a)
				if v[0] != strconv.Itoa(i) || v[1] != strconv.Itoa(g) {
					t.Errorf("get(%d, %d) = %q", i, g, v)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := len(*c.m.Load()); n != maxCachedPolicies {
		t.Fatalf("cache holds %d policies, want the bound %d", n, maxCachedPolicies)
	}
}

// keySink makes a key escape, as a key handed to the client does: a short
// string that does not escape is built on the stack.
var keySink string

// TestArgvAllocs: beyond what valkey-go allocates, the store's part of a
// decision is the key string and its arguments; with the server's clock,
// cost 1 and a cached policy, the arguments cost nothing and the key one
// allocation.
func TestArgvAllocs(t *testing.T) {
	var c argCache
	p := core.PerSecond("allocs", 1_000_000)
	a := core.NewScriptArgs(&p, 0, 1)
	var out [10]string
	all := store.NewScript("all", "return 0")
	c.argv(all, &a, out[:0])
	if n := testing.AllocsPerRun(1000, func() { c.argv(all, &a, out[:0]) }); n != 0 {
		t.Fatalf("argv allocates %v times per call, want 0", n)
	}
	key := store.Key{Namespace: "sluice:allocs", Identity: "client"}
	if n := testing.AllocsPerRun(1000, func() { keySink = key.String() }); n != 1 {
		t.Fatalf("Key.String allocates %v times per call, want 1", n)
	}
}
