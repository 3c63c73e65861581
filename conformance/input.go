package conformance

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// checkBadInput: every bad argument and every invalid policy is rejected
// with an error matching core.ErrInvalidInput or core.ErrInvalidPolicy, and
// nothing is written: with an Inspector the key does not exist, and in any
// case the next valid request meets a fresh key.
func checkBadInput(t testing.TB, e *env) {
	p := core.Policy{Name: "bad-input", Limit: 5, Window: time.Hour, LeaseTTL: time.Hour}
	clock := core.NewManualClock(epoch)
	s := e.stores[0]
	l := e.limiter(t, s, p, clock)
	id := identity(t, l)
	ctx := t.Context()
	q := l.Quota()

	type badCall struct {
		what string
		do   func() error
	}
	calls := []badCall{{`Reset("")`, func() error { return l.Reset(ctx, "") }}}
	if e.leaser != nil {
		calls = append(calls, badCall{`Acquire("")`, func() error { _, _, err := l.Acquire(ctx, ""); return err }})
	} else {
		calls = append(calls, badCall{`Allow("")`, func() error { _, err := l.Allow(ctx, ""); return err }})
		for _, n := range []int64{0, -1, math.MinInt64, q + 1, math.MaxInt64} {
			calls = append(calls, badCall{fmt.Sprintf("AllowN(%d) with quota %d", n, q), func() error { _, err := l.AllowN(ctx, id, n); return err }})
		}
		calls = append(calls, badCall{`AllowN("", 0)`, func() error { _, err := l.AllowN(ctx, "", 0); return err }})
	}
	for _, c := range calls {
		if err := c.do(); !errors.Is(err, core.ErrInvalidInput) || err.Error() == "" {
			t.Errorf("%s: %s returned %v, want an error matching core.ErrInvalidInput", e.alg.Name(), c.what, err)
		}
	}

	for _, b := range badPolicies(p) {
		bl, err := core.New(core.Config{Policy: b.p, Algorithm: e.alg, Store: s, Prefix: keyPrefix, Clock: clock, NoScript: !e.script})
		if !errors.Is(err, core.ErrInvalidPolicy) || bl != nil {
			t.Errorf("%s: a policy with %s (%+v): core.New returned %v, want an error matching core.ErrInvalidPolicy", e.alg.Name(), b.what, b.p, err)
		}
	}

	if insp, ok := e.h.(Inspector); ok {
		if found, err := insp.Exists(ctx, l.Key(id)); err != nil || found {
			t.Errorf("%s: after rejected calls only, Exists(%v) = %v, %v; want false: a rejected call wrote", e.alg.Name(), l.Key(id), found, err)
		}
	}
	// The first valid request meets a fresh key: the whole quota.
	n := q
	if e.leaser != nil {
		n = 1
	}
	if got, want := first(t, e, l, id, n), e.fresh(p, clock.Now(), n); got != want {
		t.Errorf("%s: after rejected calls, the first valid request (n=%d) decided %+v; a fresh key decides %+v", e.alg.Name(), n, got, want)
	}
}

func first(t testing.TB, e *env, l *core.Limiter, id string, n int64) core.Decision {
	t.Helper()
	d, _ := e.take(t, l, id, n)
	return d
}

// badPolicies are variations of p that core.Policy.Validate must reject.
func badPolicies(p core.Policy) []struct {
	what string
	p    core.Policy
} {
	with := func(f func(*core.Policy)) core.Policy { q := p; f(&q); return q }
	return []struct {
		what string
		p    core.Policy
	}{
		{"zero Limit", with(func(q *core.Policy) { q.Limit = 0 })},
		{"negative Limit", with(func(q *core.Policy) { q.Limit = -1 })},
		{"Limit above MaxLimit", with(func(q *core.Policy) { q.Limit = core.MaxLimit + 1; q.Window = core.MaxWindow })},
		{"more than one unit per µs", with(func(q *core.Policy) { q.Limit = 2000; q.Window = time.Millisecond })},
		{"zero Window", with(func(q *core.Policy) { q.Window = 0 })},
		{"negative Window", with(func(q *core.Policy) { q.Window = -time.Hour })},
		{"Window below 1ms", with(func(q *core.Policy) { q.Window = core.MinWindow - time.Microsecond })},
		{"Window above 30 days", with(func(q *core.Policy) { q.Window = core.MaxWindow + time.Microsecond })},
		{"negative Burst", with(func(q *core.Policy) { q.Burst = -1 })},
		{"negative MaxDelay", with(func(q *core.Policy) { q.MaxDelay = -time.Second })},
		{"negative LeaseTTL", with(func(q *core.Policy) { q.LeaseTTL = -time.Second })},
		{"empty Name", with(func(q *core.Policy) { q.Name = "" })},
		{"a separator in Name", with(func(q *core.Policy) { q.Name = "bad:input" })},
		{"a brace in Name", with(func(q *core.Policy) { q.Name = "bad{input}" })},
		{"a space in Name", with(func(q *core.Policy) { q.Name = "bad input" })},
		{"a Name too long", with(func(q *core.Policy) { q.Name = strings.Repeat("n", core.MaxNameLen+1) })},
	}
}

// checkIdentities: identities that are long, binary, or full of the
// characters store keys use as separators all work, and each keeps a state
// of its own; so does one identity under another policy, or another
// prefix (a namespace of its own: Key.Namespace).
func checkIdentities(t testing.TB, e *env) {
	p := core.Policy{Name: "identities", Limit: 3, Window: time.Hour, LeaseTTL: time.Hour}
	clock := core.NewManualClock(epoch)
	fleet := e.fleet(t, p, clock, clock)
	base := identity(t, fleet[0])
	// Pairs a store that mangles identities would make one: bytes that
	// are not UTF-8 ("\xff", "\xfe": one U+FFFD each), a space and a '_'
	// (a naive key sanitizer), "%41" and "A" (decoded), and, below, two
	// long identities that end alike (a store keeping only an end).
	suffixes := []string{"", "\x00", "\x00\x00", "{x}", "}:{", ":", "*", "?", " ", "_", "\n", "\r\n", "é",
		"\xff\xfe", "\xff", "\xfe", "A", "a", "%41", strings.Repeat("x", 64<<10), strings.Repeat("x", 64<<10) + "y"}
	ids := make([]string, len(suffixes), len(suffixes)+2)
	for i, s := range suffixes {
		ids[i] = base + s
	}
	ids = append(ids, "a"+base+strings.Repeat("x", 1<<10), "b"+base+strings.Repeat("x", 1<<10))
	for _, id := range ids {
		forget(t, fleet[0], id)
	}
	want := serial(e.alg, p, clock.Now(), 1, 2)
	for round := range 2 {
		for i, id := range ids {
			got, _ := e.take(t, fleet[(i+round)%2], id, 1)
			if got != want[round] {
				t.Errorf("%s: identity %q (%d bytes), request %d: decided %+v, want %+v: identities share state or are mangled",
					e.alg.Name(), truncate(id), len(id), round+1, got, want[round])
			}
		}
	}
	// Keys must differ whenever their namespace or identity does: for
	// each pair, the first key has two requests, and then the second's
	// first request meets a fresh key. The pairs catch a store that keys
	// by less than the whole of Key.String(): one that drops the policy or
	// the prefix, folds a namespace's case, cuts a long one short, or
	// joins namespace and identity with a separator they may hold (':',
	// "::", none: a prefix may hold ':' and a name '-').
	other := func(prefix, name string) *core.Limiter {
		q := p
		q.Name = name
		return e.limiterUnder(t, prefix, e.stores[1%len(e.stores)], q, clock)
	}
	long := keyPrefix + "-" + strings.Repeat("n", core.MaxNameLen-len(keyPrefix)-1)
	for _, c := range []struct {
		what     string
		first    *core.Limiter
		firstID  string
		second   *core.Limiter
		secondID string
		charged  bool // the first key has had its two requests
	}{
		{"another policy", fleet[0], base, other(keyPrefix, "identities-other"), base, true},
		{"another prefix", fleet[0], base, other(keyPrefix+"-other", p.Name), base, true},
		{"a prefix of another case", other(keyPrefix+"-Case", p.Name), base, other(keyPrefix+"-case", p.Name), base, false},
		{"a long namespace that differs at its end", other(long, p.Name+"-a"), base, other(long, p.Name+"-b"), base, false},
		{"a namespace and identity that join with ':' as another pair", fleet[0], "k:" + base, other(keyPrefix+":"+p.Name, "k"), base, false},
		{"a namespace and identity that join with '::' as another pair", fleet[0], "k::" + base, other(keyPrefix+":"+p.Name+":", "k"), base, false},
		{"a namespace and identity that join with no separator as another pair", fleet[0], "-x" + base, other(keyPrefix, p.Name+"-x"), base, false},
		{"a policy named with a '.' where another has a '-'", other(keyPrefix, p.Name+".y"), base, other(keyPrefix, p.Name+"-y"), base, false},
	} {
		if !c.charged {
			forget(t, c.first, c.firstID)
			for range 2 {
				e.take(t, c.first, c.firstID, 1)
			}
		}
		forget(t, c.second, c.secondID)
		if got, _ := e.take(t, c.second, c.secondID, 1); got != want[0] {
			t.Errorf("%s: identity %q under %s (namespace %q, after two requests of %q under %q): first request decided %+v, want %+v: "+
				"the store keeps one state for several namespaces (it must key by Key.String(), namespace and all)",
				e.alg.Name(), truncate(c.secondID), c.what, c.second.Key(c.secondID).Namespace,
				truncate(c.firstID), c.first.Key(c.firstID).Namespace, got, want[0])
		}
	}
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
