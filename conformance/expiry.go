package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// expiryGrace is how long after its TTL (rounded down to a second) a key
// may still exist: Memcached counts in whole seconds, and a server may
// expire lazily.
var expiryGrace = 6 * time.Second

// checkExpiry (with an Inspector): a key written with a short TTL exists
// while its TTL runs, and is gone some time after; then a decision on the
// expired key gets a fresh quota (the Go step's decision on no state), and
// its admission writes the key again. Gone is not enough: a store whose
// expired entries linger where a new key's write cannot replace them (an
// INSERT that does nothing on conflict) hides them from Exists, yet fails
// or forgets every decision after the first expiry. The wait is bounded by
// the TTL rounded up to a second (Memcached's granularity) plus a few
// seconds; a store that passes ends it as soon as its keys are gone. Keys of
// every algorithm wait together.
func checkExpiry(t testing.TB, h Harness, algs []core.Algorithm, script bool) {
	insp, ok := h.(Inspector)
	if !ok {
		t.Skip("the harness is not an Inspector: expiry is not observable")
	}
	const w = 100 * time.Millisecond
	p := core.Policy{Name: "expiry", Limit: 2, Window: w, MaxDelay: w, LeaseTTL: w}
	// slack allows for a server clock a little off this machine's.
	const slack = 50 * time.Millisecond
	type written struct {
		alg string
		key store.Key
		ttl time.Duration
		at  time.Time
		e   *env
		l   *core.Limiter
		id  string
	}
	var keys []written
	var longest time.Duration
	store := h.NewStore(t)
	for _, e := range pathEnvs(h, algs, script, p) {
		alg := e.alg
		l := e.limiter(t, store, p, nil)
		id := identity(t, l)
		start := time.Now()
		next, ttl, _ := apply(alg, &p, nil, start.UnixMicro(), call{n: 1, lease: 1})
		if next == nil {
			continue // the algorithm writes nothing for a first request
		}
		if d, _ := e.take(t, l, id, 1); !d.Allowed {
			t.Fatalf("%s: the first request on a fresh key was denied: %+v", alg.Name(), d)
		}
		found, err := insp.Exists(t.Context(), l.Key(id))
		if err != nil {
			t.Fatalf("%s: Exists: %v", alg.Name(), err)
		}
		if !found && time.Since(start) < ttl-slack {
			t.Errorf("%s: an admission wrote no key (or one that expired before its TTL of %v)", alg.Name(), ttl)
		}
		keys = append(keys, written{alg.Name(), l.Key(id), ttl, start, e, l, id})
		longest = max(longest, ttl)
	}
	deadline := time.Now().Add(longest.Truncate(time.Second) + expiryGrace)
	for len(keys) > 0 {
		var live []written
		for _, k := range keys {
			found, err := insp.Exists(t.Context(), k.key)
			if err != nil {
				t.Fatalf("%s: Exists: %v", k.alg, err)
			}
			if found {
				live = append(live, k)
			} else {
				checkRewrite(t, insp, &p, k.e, k.l, k.id, k.ttl)
			}
		}
		keys = live
		if len(keys) > 0 && time.Now().After(deadline) {
			for _, k := range keys {
				t.Errorf("%s: a key written with TTL %v still exists %v later", k.alg, k.ttl, time.Since(k.at).Round(time.Millisecond))
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkRewrite decides once on id, whose key has just expired: the store
// must start it fresh, decide as the Go step does on no state, and keep
// what the admission wrote (checked with the Inspector, as for the first
// write, where the TTL is long enough to see it).
func checkRewrite(t testing.TB, insp Inspector, p *core.Policy, e *env, l *core.Limiter, id string, ttl time.Duration) {
	t.Helper()
	const slack = 50 * time.Millisecond
	name := e.alg.Name()
	start := time.Now()
	want := e.fresh(*p, start, 1)
	var d core.Decision
	var err error
	if e.leaser != nil {
		var ls *core.Lease
		if ls, d, err = l.Acquire(t.Context(), id); ls != nil {
			defer func() { _ = ls.Release(context.Background()) }()
		}
	} else {
		d, err = l.Allow(t.Context(), id)
	}
	if err != nil {
		t.Errorf("%s: a decision after its key expired failed: %v (the store must rewrite an expired key)", name, err)
		return
	}
	if !d.Allowed || d.Remaining != want.Remaining {
		t.Errorf("%s: a decision after its key expired got %+v; want a fresh quota, %+v", name, d, want)
		return
	}
	found, err := insp.Exists(t.Context(), l.Key(id))
	if err != nil {
		t.Fatalf("%s: Exists: %v", name, err)
	}
	if !found && time.Since(start) < ttl-slack {
		t.Errorf("%s: an admission after its key expired wrote no key (the store must rewrite an expired key)", name)
	}
}

// pathEnvs is an env for each algorithm of algs that runs on the path
// (script: those with a Lua twin) under p, for the checks that run once per
// path with a key of every algorithm.
func pathEnvs(h Harness, algs []core.Algorithm, script bool, p core.Policy) []*env {
	var es []*env
	for _, alg := range algs {
		if alg == nil {
			continue
		}
		if _, ok := alg.(core.Scripted); script && !ok {
			continue
		}
		if checkPolicy(alg, p) != nil {
			continue
		}
		e := &env{h: h, alg: alg, script: script}
		e.leaser, _ = alg.(core.Leaser)
		es = append(es, e)
	}
	return es
}
