package algorithm

import (
	"context"
	"math/rand/v2"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// The work of one decision of the Lua twin is bounded whatever its cost n
// (a client may choose it, up to Limit): it adds at most one member, so a
// cost of 10,000 is one ZADD, not ten thousand.
func TestSlidingLogLuaCostIsOneMember(t *testing.T) {
	c := newRedis(t)
	ctx := context.Background()
	s := SlidingLog{}.Script()
	p := core.Policy{Name: "sl", Limit: SlidingLogMaxLimit, Window: time.Hour}
	key := freshKey(t, c)
	steps := []struct {
		at      int64
		n       int64
		allowed bool
		members int64
	}{
		{0, SlidingLogMaxLimit, true, 1}, // the whole quota at once
		{0, 1, false, 1},
		{1, 1, false, 1},
	}
	small := freshKey(t, c)
	for i, st := range steps {
		got := core.ScriptDecision(runLua(t, c, s, key, core.NewScriptArgs(&p, winBase+st.at, st.n)))
		if got.Allowed != st.allowed {
			t.Fatalf("call %d (n=%d): %+v, want allowed %v", i, st.n, got, st.allowed)
		}
		if m := c.ZCard(ctx, key).Val(); m != st.members {
			t.Fatalf("after call %d (n=%d): %d members, want %d", i, st.n, m, st.members)
		}
	}
	// Units of one instant share its member; each instant has one.
	for i, st := range []struct{ at, n, members int64 }{{0, 3, 1}, {0, 4, 1}, {5, 2, 2}, {5, 1, 2}, {9, 1, 3}} {
		if got := core.ScriptDecision(runLua(t, c, s, small, core.NewScriptArgs(&p, winBase+st.at, st.n))); !got.Allowed {
			t.Fatalf("small call %d: denied %+v", i, got)
		}
		if m := c.ZCard(ctx, small).Val(); m != st.members {
			t.Fatalf("after small call %d (n=%d at %d): %d members, want %d", i, st.n, st.at, m, st.members)
		}
	}
}

// slExpiredPerCall is the twin's EXPIRED_PER_CALL, read from its source.
func slExpiredPerCall(t *testing.T) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^local EXPIRED_PER_CALL = (\d+)$`).FindStringSubmatch(SlidingLog{}.Script().Source)
	if m == nil {
		t.Fatal("lua/sliding-log.lua sets no EXPIRED_PER_CALL")
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// An admission drops at most EXPIRED_PER_CALL members that have left the
// window, never the whole log at once: 200 single admissions that expire
// together cost the next admissions a few removals each. The set never
// holds more than Limit members, and every decision is the Go step's.
func TestSlidingLogLuaDropsExpiredMembersAFewAtATime(t *testing.T) {
	c := newRedis(t)
	ctx := context.Background()
	s := SlidingLog{}.Script()
	const calls = 200
	p := core.Policy{Name: "sl", Limit: calls, Window: time.Hour}
	w := p.WindowMicros()
	perCall := slExpiredPerCall(t)
	key := freshKey(t, c)
	var state []byte
	decide := func(at, n int64) core.Decision {
		t.Helper()
		got := core.ScriptDecision(runLua(t, c, s, key, core.NewScriptArgs(&p, at, n)))
		next, _, want := SlidingLog{}.Step(clone(state), at, n, &p)
		if got != want {
			t.Fatalf("at %d, n=%d: Lua %+v, Go %+v", at-winBase, n, got, want)
		}
		if next != nil {
			state = clone(next)
		}
		return got
	}
	for i := range int64(calls) {
		decide(winBase+i, 1)
	}
	if m := c.ZCard(ctx, key).Val(); m != calls {
		t.Fatalf("%d members after %d admissions at distinct instants, want %d", m, calls, calls)
	}
	at := winBase + w + calls // every member has left the window
	for round := 1; round <= 3; round++ {
		if d := decide(at+int64(round), 1); !d.Allowed {
			t.Fatalf("round %d: denied %+v", round, d)
		}
		want := int64(calls - round*perCall + round)
		if m := c.ZCard(ctx, key).Val(); m != want {
			t.Fatalf("after admission %d past the window: %d members, want %d (%d expired ones dropped per admission)", round, m, want, perCall)
		}
	}

	// Random traffic: never more than Limit members.
	r := rand.New(rand.NewPCG(3, 4))
	now := at + 10
	for i := range 2000 {
		now += []int64{0, 1, w / 7, w / 3, w, -w / 5}[r.IntN(6)]
		decide(now, 1+r.Int64N(3))
		if m := c.ZCard(ctx, key).Val(); m > p.Limit {
			t.Fatalf("call %d: %d members, above Limit %d", i, m, p.Limit)
		}
	}
}
