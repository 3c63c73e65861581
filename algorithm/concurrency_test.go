package algorithm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// Two leases at once, each reclaimed 500ms after it is taken.
var ccPolicy = core.Policy{Name: "cc", Limit: 2, Window: time.Second, LeaseTTL: 500 * time.Millisecond}

// ccCall is one row of a concurrency table test: an Acquire (or, with lease
// 0, a Step) or a Release at an explicit time.
type ccCall struct {
	at      int64
	lease   uint64
	release bool
	want    core.Decision // Acquire only
	ttl     time.Duration // 0 when nothing is written
}

func runCC(t *testing.T, p core.Policy, state []byte, calls []ccCall) []byte {
	t.Helper()
	c := Concurrency{}
	for i, k := range calls {
		var next []byte
		var ttl time.Duration
		if k.release {
			next, ttl = c.Release(clone(state), k.at, k.lease, &p)
		} else {
			var d core.Decision
			if k.lease == 0 {
				next, ttl, d = c.Step(clone(state), k.at, 1, &p)
			} else {
				next, ttl, d = c.Acquire(clone(state), k.at, k.lease, &p)
			}
			if d != k.want {
				t.Fatalf("call %d (at t0%+d, lease %d):\n got  %+v\n want %+v", i, k.at-bkT0, k.lease, d, k.want)
			}
			if (next != nil) != d.Allowed {
				t.Fatalf("call %d: next %x with Allowed %v", i, next, d.Allowed)
			}
		}
		if ttl != k.ttl || (next != nil) != (k.ttl > 0) {
			t.Fatalf("call %d (at t0%+d, lease %d, release %v): next %x, ttl %v; want ttl %v", i, k.at-bkT0, k.lease, k.release, next, ttl, k.ttl)
		}
		if next != nil {
			state = next
		}
	}
	return state
}

func TestConcurrencyLeases(t *testing.T) {
	const A, B, C, D, E = 101, 102, 103, 104, 105
	us := time.Microsecond
	state := runCC(t, ccPolicy, nil, []ccCall{
		{at: bkT0, lease: A, want: admit(2, 1, 500_000, 0), ttl: 500_000 * us},
		{at: bkT0 + 100_000, lease: B, want: admit(2, 0, 500_000, 0), ttl: 500_000 * us},
		// Full: one slot frees when A's TTL runs out.
		{at: bkT0 + 100_000, lease: C, want: deny(2, 0, 400_000, 500_000)},
		// Releasing A frees its slot at once.
		{at: bkT0 + 200_000, lease: A, release: true, ttl: 400_000 * us},
		{at: bkT0 + 200_000, lease: C, want: admit(2, 0, 500_000, 0), ttl: 500_000 * us},
		// A second release, or one of a lease never held, writes nothing.
		{at: bkT0 + 200_000, lease: A, release: true},
		{at: bkT0 + 200_000, lease: 999, release: true},
		// B's expiry is exactly now: its slot is free.
		{at: bkT0 + 600_000, lease: D, want: admit(2, 0, 500_000, 0), ttl: 500_000 * us},
		// Releasing an expired lease writes nothing.
		{at: bkT0 + 600_000, lease: B, release: true},
		// The clock steps back: B stays gone; C and D are held.
		{at: bkT0 + 300_000, lease: E, want: deny(2, 0, 400_000, 800_000)},
		// Acquiring a lease already held is denied when full, like any...
		{at: bkT0 + 300_000, lease: D, want: deny(2, 0, 400_000, 800_000)},
		// ...and renews its expiry, taking no second slot, when not.
		{at: bkT0 + 700_000, lease: D, want: admit(2, 1, 500_000, 0), ttl: 500_000 * us},
		// Step takes an anonymous lease, which only its TTL frees.
		{at: bkT0 + 700_000, want: admit(2, 0, 500_000, 0), ttl: 500_000 * us},
		{at: bkT0 + 700_000, want: deny(2, 0, 500_000, 500_000)},
		{at: bkT0 + 700_000, release: true},
		{at: bkT0 + 800_000, lease: D, release: true, ttl: 400_000 * us},
	})
	checkFreshAfterTTL(t, Concurrency{}, &ccPolicy, state, bkT0+800_000, 400_000*us)

	// Releasing the last lease leaves an empty list that reads as fresh.
	state = runCC(t, ccPolicy, state, []ccCall{
		{at: bkT0 + 2_000_000, lease: A, want: admit(2, 1, 500_000, 0), ttl: 500_000 * us},
		{at: bkT0 + 2_100_000, lease: A, release: true, ttl: us},
	})
	if !bytes.Equal(state, []byte{ccVersion}) {
		t.Fatalf("state after the last release: %x, want the empty list", state)
	}
	// (checkUndecodable compares with no state: the empty list must match.)
	checkUndecodable(t, Concurrency{}, ccPolicy, [][]byte{state})
}

func TestConcurrencyShrunkLimit(t *testing.T) {
	// Three leases written under a Limit of 3, read under a Limit of 1: a
	// lease fits only once all three have expired.
	p := ccPolicy
	p.Limit = 3
	state := runCC(t, p, nil, []ccCall{
		{at: bkT0, lease: 1, want: admit(3, 2, 500_000, 0), ttl: 500_000 * time.Microsecond},
		{at: bkT0 + 10, lease: 2, want: admit(3, 1, 500_000, 0), ttl: 500_000 * time.Microsecond},
		{at: bkT0 + 20, lease: 3, want: admit(3, 0, 500_000, 0), ttl: 500_000 * time.Microsecond},
	})
	p.Limit = 1
	runCC(t, p, state, []ccCall{
		{at: bkT0 + 30, lease: 4, want: deny(1, 0, 499_990, 499_990)},
		{at: bkT0 + 500_019, lease: 4, want: deny(1, 0, 1, 1)},
		{at: bkT0 + 500_020, lease: 4, want: admit(1, 0, 500_000, 0), ttl: 500_000 * time.Microsecond},
	})
}

func TestConcurrencyCheckPolicy(t *testing.T) {
	p := core.Policy{Name: "cc", Limit: ConcurrencyMaxLimit, Window: time.Minute}
	if err := (Concurrency{}).CheckPolicy(&p); err != nil {
		t.Fatalf("Limit %d: %v", p.Limit, err)
	}
	p.Limit++
	err := Concurrency{}.CheckPolicy(&p)
	var pe *core.PolicyError
	if !errors.As(err, &pe) || pe.Field != "Limit" || !errors.Is(err, core.ErrInvalidPolicy) {
		t.Fatalf("Limit %d: %v, want a *core.PolicyError for Limit", p.Limit, err)
	}
}

func TestConcurrencyUndecodable(t *testing.T) {
	good, _, _ := Concurrency{}.Acquire(nil, bkT0, 7, &ccPolicy)
	good, _, _ = Concurrency{}.Acquire(good, bkT0+1, 8, &ccPolicy)
	unsorted := clone(good)
	copy(unsorted[1:], good[1+ccEntry:])
	copy(unsorted[1+ccEntry:], good[1:1+ccEntry])
	tooMany := []byte{ccVersion}
	for i := range ConcurrencyMaxLimit + 1 {
		tooMany = binary.BigEndian.AppendUint64(tooMany, uint64(bkT0+i))
		tooMany = binary.BigEndian.AppendUint64(tooMany, uint64(i+1))
	}
	checkUndecodable(t, Concurrency{}, ccPolicy, [][]byte{
		{},
		good[:len(good)-1],
		append(clone(good), 0),
		append([]byte{gcraVersion}, good[1:]...),
		unsorted,
		tooMany,
	})
	// And a release on them writes nothing.
	for _, s := range [][]byte{{}, unsorted, tooMany} {
		if next, ttl := (Concurrency{}).Release(clone(s), bkT0, 7, &ccPolicy); next != nil || ttl != 0 {
			t.Errorf("Release on undecodable state %.20x...: next %x, ttl %v", s, next, ttl)
		}
	}
}

func TestConcurrencyZeroAllocs(t *testing.T) {
	c := Concurrency{}
	state, _, _ := c.Acquire(nil, bkT0, 1, &ccPolicy)
	state = append(state, make([]byte, 4*ccEntry)...)[:len(state)] // room to grow, as a store's buffer has
	now := int64(bkT0)
	allocs := testing.AllocsPerRun(1000, func() {
		now += 1000
		state, _, _ = c.Acquire(state, now, 2, &ccPolicy)
		state, _ = c.Release(state, now, 2, &ccPolicy)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Acquire+Release on an existing key, want 0", allocs)
	}
}

// ccModelLease is the fuzz target's own record of one lease.
type ccModelLease struct {
	id                uint64
	exp               int64
	released, dropped bool
}

func FuzzConcurrency(f *testing.F) {
	f.Add(uint8(1), uint32(999), uint32(0), []byte{0, 0, 0, 0, 3, 3, 0, 2, 9, 0, 7, 4, 0, 1})
	f.Add(uint8(2), uint32(59_999), uint32(1000), []byte{0, 0, 1, 0, 2, 3, 3, 1, 10, 0, 11, 4, 13, 0, 0, 2, 0, 6})
	f.Add(uint8(15), uint32(99), uint32(7), []byte{0, 0, 0, 0, 0, 0, 0, 4, 0, 4, 6, 2, 6, 3, 7, 5, 9, 0, 10, 1})
	f.Add(uint8(0), uint32(0), uint32(0), []byte{0, 4, 0, 4, 1, 5, 2, 6, 3, 3, 4, 2, 9, 4, 11, 0})
	f.Fuzz(func(t *testing.T, limit uint8, windowMs, ttlMs uint32, ops []byte) {
		p := core.Policy{Name: "fuzz", Limit: int64(limit%16) + 1, Window: time.Duration(windowMs%3_600_000+1) * time.Millisecond}
		if ttlMs != 0 {
			p.LeaseTTL = time.Duration(ttlMs%3_600_000+1) * time.Millisecond
		}
		if p.Validate() != nil {
			return
		}
		if len(ops) > 1200 {
			ops = ops[:1200]
		}
		fuzzConcurrency(t, p, ops)
	})
}

// fuzzConcurrency drives Acquire, Release and Step through ops (two bytes
// each: clock step, action) and checks every answer against a model of its
// own: a list of leases with flags, in place of the step's sorted bytes.
func fuzzConcurrency(t *testing.T, p core.Policy, ops []byte) {
	c := Concurrency{}
	lt := p.LeaseTTLMicros()
	var model []ccModelLease
	var state []byte
	now, hwm := int64(bkT0), int64(0)
	nextID := uint64(1 << 62)
	// alive are the model's leases still in the step's state and unexpired
	// at now.
	alive := func(now int64) []int64 {
		var exps []int64
		for _, l := range model {
			if !l.released && !l.dropped && l.exp > now {
				exps = append(exps, l.exp)
			}
		}
		slices.Sort(exps)
		return exps
	}
	// write is what a call that writes does to the model: it drops the
	// expired leases.
	write := func(now int64) {
		hwm = max(hwm, now)
		for i := range model {
			if model[i].exp <= now {
				model[i].dropped = true
			}
		}
	}
	for i := 0; i+1 < len(ops); i += 2 {
		now = max(now+bkFuzzStep(ops[i], lt/3+1, lt), 0)
		act := ops[i+1]
		var id uint64
		switch {
		case act%5 == 2 && len(model) > 0:
			id = model[int(act/5)%len(model)].id // re-acquire, or release, a known id
		case act%5 == 4:
			id = 0 // anonymous
		default:
			nextID += 977
			id = nextID
		}
		exps := alive(now)
		if act%7 == 3 || act%7 == 5 {
			// Release.
			next, ttl := c.Release(clone(state), now, id, &p)
			j := slices.IndexFunc(model, func(l ccModelLease) bool {
				return id != 0 && l.id == id && !l.released && !l.dropped && l.exp > now
			})
			if (next != nil) != (j >= 0) {
				t.Fatalf("op %d: Release(%d) at t0%+d wrote %v, the model says %v", i/2, id, now-bkT0, next != nil, j >= 0)
			}
			if j < 0 {
				continue
			}
			model[j].released = true
			write(now)
			if rest := alive(now); len(rest) == 0 {
				if ttl != time.Microsecond || !bytes.Equal(next, []byte{ccVersion}) {
					t.Fatalf("op %d: the last release: next %x, ttl %v", i/2, next, ttl)
				}
			} else {
				if want := core.Micros(rest[len(rest)-1] - now); ttl != want {
					t.Fatalf("op %d: release ttl %v, want %v", i/2, ttl, want)
				}
				checkFreshAfterTTL(t, c, &p, next, now, ttl)
			}
			state = next
			continue
		}
		// Acquire (a Step, for id 0).
		var next []byte
		var ttl time.Duration
		var d core.Decision
		if id == 0 {
			next, ttl, d = c.Step(clone(state), now, 1, &p)
		} else {
			next, ttl, d = c.Acquire(clone(state), now, id, &p)
		}
		held := int64(len(exps))
		want := core.Decision{Limit: p.Limit}
		if held >= p.Limit {
			want.RetryAfter = core.Micros(exps[held-p.Limit] - now)
			want.ResetAfter = core.Micros(exps[held-1] - now)
		} else {
			write(now)
			j := slices.IndexFunc(model, func(l ccModelLease) bool {
				return id != 0 && l.id == id && !l.released && !l.dropped
			})
			if j >= 0 {
				model[j].exp = now + lt
			} else {
				model = append(model, ccModelLease{id: id, exp: now + lt})
			}
			after := alive(now)
			want.Allowed = true
			want.Remaining = p.Limit - int64(len(after))
			want.ResetAfter = core.Micros(after[len(after)-1] - now)
			// The bound: leases neither released nor expired at the
			// latest now of any write number at most Limit.
			inFlight := int64(0)
			for _, l := range model {
				if !l.released && l.exp > hwm {
					inFlight++
				}
			}
			if inFlight > p.Limit {
				t.Fatalf("op %d: %d leases in flight at t0%+d, limit %d", i/2, inFlight, hwm-bkT0, p.Limit)
			}
		}
		where := func() string {
			return fmt.Sprintf("%v: op %d at t0%+d, lease %d", p, i/2, now-bkT0, id)
		}
		if d != want {
			t.Fatalf("%s:\n got  %+v\n want %+v", where(), d, want)
		}
		if (next != nil) != d.Allowed || (ttl > 0) != d.Allowed || (d.Allowed && ttl != d.ResetAfter) {
			t.Fatalf("%s: next %x, ttl %v for %+v", where(), next, ttl, d)
		}
		if !d.Allowed {
			// RetryAfter is exact, for a new lease.
			ra := int64(d.RetryAfter / time.Microsecond)
			if _, _, e := c.Acquire(clone(state), now+ra, 1, &p); !e.Allowed {
				t.Fatalf("%s: denied again after RetryAfter: %+v", where(), e)
			}
			if _, _, e := c.Acquire(clone(state), now+ra-1, 1, &p); e.Allowed {
				t.Fatalf("%s: admitted 1µs before RetryAfter: %+v", where(), e)
			}
			continue
		}
		checkFreshAfterTTL(t, c, &p, next, now, ttl)
		state = next
	}
}

// ccPolicies are the policies the concurrency twin is checked under.
var ccPolicies = []core.Policy{
	{Name: "one", Limit: 1, Window: time.Second},
	{Name: "three-short-ttl", Limit: 3, Window: time.Second, LeaseTTL: time.Millisecond},
	{Name: "ten", Limit: 10, Window: time.Minute, LeaseTTL: 7 * time.Second},
	{Name: "long-ttl", Limit: 4, Window: time.Second, LeaseTTL: core.MaxWindow},
	{Name: "max", Limit: ConcurrencyMaxLimit, Window: time.Minute},
}

func TestConcurrencyLua(t *testing.T) { diffBucket(t, Concurrency{}, ccPolicies, 6, 200) }

// The anonymous leases of Step get unique members: many at one instant,
// some released neighbours in between, decide as the Go step does.
func TestConcurrencyLuaAnonymous(t *testing.T) {
	c := newRedis(t)
	p := core.Policy{Name: "anon", Limit: 5, Window: time.Minute}
	key := freshKey(t, c)
	s := Concurrency{}.Script()
	var state []byte
	r := rand.New(rand.NewPCG(3, 4))
	now := int64(bkT0)
	var held []uint64
	for i := range 300 {
		now += r.Int64N(3) * 10_000_000
		a := core.NewScriptArgs(&p, now, 1)
		var want core.Decision
		var next []byte
		switch k := r.IntN(3); {
		case k == 0 && len(held) > 0:
			j := r.IntN(len(held))
			a.Lease, a.Op = held[j], store.OpRelease
			held = slices.Delete(held, j, j+1)
			if next, _ = (Concurrency{}).Release(clone(state), now, a.Lease, &p); next != nil {
				state = next
			}
			runLua(t, c, s, key, a)
			continue
		case k == 1:
			a.Lease = 1<<63 + uint64(i)
			next, _, want = Concurrency{}.Acquire(clone(state), now, a.Lease, &p)
			if want.Allowed {
				held = append(held, a.Lease)
			}
		default:
			next, _, want = Concurrency{}.Step(clone(state), now, 1, &p)
		}
		if next != nil {
			state = next
		}
		if got := core.ScriptDecision(runLua(t, c, s, key, a)); got != want {
			t.Fatalf("call %d (lease %d): Lua %+v, Go %+v", i, a.Lease, got, want)
		}
	}
}

func TestConcurrencyLuaServerTime(t *testing.T) { checkServerTime(t, Concurrency{}, ccPolicy) }

func TestConcurrencyLuaMemory(t *testing.T) {
	p := core.Policy{Name: "api-requests", Limit: ConcurrencyMaxLimit, Window: time.Minute}
	n, usage, enc := memoryUsage(t, Concurrency{}, p, core.DefaultPrefix)
	t.Logf("a concurrency key of %d bytes with two leases: %q, MEMORY USAGE %d bytes", n, enc, usage)
	// Per lease, in both of Redis's encodings of a sorted set.
	c := newRedis(t)
	ctx := context.Background()
	s := Concurrency{}.Script()
	for _, k := range []int{100, ConcurrencyMaxLimit} {
		key := freshKey(t, c)
		for i := range k {
			a := core.NewScriptArgs(&p, bkT0+int64(i), 1)
			a.Lease = 1<<63 + uint64(i)*0x9e3779b97f4a7c15%(1<<63) // 19 or 20 digits
			if d := core.ScriptDecision(runLua(t, c, s, key, a)); !d.Allowed {
				t.Fatalf("lease %d denied: %+v", i, d)
			}
		}
		usage := c.MemoryUsage(ctx, key, 0).Val()
		enc := c.ObjectEncoding(ctx, key).Val()
		t.Logf("%d leases: %q, MEMORY USAGE %d bytes, %d a lease", k, enc, usage, usage/int64(k))
		if usage/int64(k) > 150 {
			t.Errorf("%d leases take %d bytes each, want at most 150", k, usage/int64(k))
		}
	}
}

func TestConcurrencyLuaCluster(t *testing.T) {
	checkOnCluster(t, Concurrency{}, core.Policy{Name: "c", Limit: 3, Window: 10 * time.Minute}, func(i int) uint64 {
		return 1<<63 + uint64(i%5) // repeats: re-acquisitions too
	})
}

// BenchmarkConcurrencyStep measures an Acquire and its Release on a key
// that holds a few other leases.
func BenchmarkConcurrencyStep(b *testing.B) {
	b.ReportAllocs()
	c, p := Concurrency{}, core.Policy{Name: "cc", Limit: 10, Window: time.Minute}
	var state []byte
	for i := range 5 {
		state, _, _ = c.Acquire(state, bkT0, uint64(100+i), &p)
	}
	now := int64(bkT0)
	for b.Loop() {
		now++
		state, _, _ = c.Acquire(state, now, 1, &p)
		state, _ = c.Release(state, now, 1, &p)
	}
}

func BenchmarkConcurrencyStepParallel(b *testing.B) {
	b.ReportAllocs()
	c, p := Concurrency{}, core.Policy{Name: "cc", Limit: 10, Window: time.Minute}
	b.RunParallel(func(pb *testing.PB) {
		var state []byte
		for i := range 5 {
			state, _, _ = c.Acquire(state, bkT0, uint64(100+i), &p)
		}
		now := int64(bkT0)
		for pb.Next() {
			now++
			state, _, _ = c.Acquire(state, now, 1, &p)
			state, _ = c.Release(state, now, 1, &p)
		}
	})
}

// The release reply is {released, limit, 0, 0, 0, 0}; a release of a lease
// not held (or on a key of another type) writes nothing.
func TestConcurrencyLuaReleaseReply(t *testing.T) {
	c := newRedis(t)
	s := Concurrency{}.Script()
	key := freshKey(t, c)
	a := core.NewScriptArgs(&ccPolicy, bkT0, 1)
	a.Lease = 1<<64 - 1
	if d := core.ScriptDecision(runLua(t, c, s, key, a)); !d.Allowed {
		t.Fatalf("acquire: %+v", d)
	}
	a.Op = store.OpRelease
	for _, want := range []store.ScriptResult{{1, 2, 0, 0, 0, 0}, {0, 2, 0, 0, 0, 0}} {
		if got := runLua(t, c, s, key, a); got != want {
			t.Fatalf("release: %v, want %v", got, want)
		}
	}
	if n := c.Exists(context.Background(), key).Val(); n != 0 {
		t.Fatalf("the emptied lease set still exists")
	}
	if err := c.Set(context.Background(), key, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := runLua(t, c, s, key, a); got != (store.ScriptResult{0, 2, 0, 0, 0, 0}) {
		t.Fatalf("release on a string key: %v", got)
	}
	if v := c.Get(context.Background(), key).Val(); v != "x" {
		t.Fatalf("release on a string key changed it to %q", v)
	}
}

// A lease set holding a score the Go step could not have written (past
// bkMaxTime, infinite: written by hand, or by other software) is not the
// step's state: the Go step reads such a state as undecodable, holding no
// lease, and the twin must read it as absent too. An Acquire replaces it
// with the new lease alone, which stays held (an infinite expiry once made
// the script's PEXPIRE negative, deleting the key and the lease with it, so
// that the next Acquires found every slot free again); a Release on it
// releases nothing and writes nothing.
func TestConcurrencyLuaUnusableScores(t *testing.T) {
	c := newRedis(t)
	ctx := context.Background()
	s := Concurrency{}.Script()
	p := core.Policy{Name: "cc", Limit: 2, Window: time.Minute}
	for _, score := range []string{"+inf", "1e300", "1e19", "9.3e18", "1e17", fmt.Sprint(int64(bkMaxTime) + 1)} {
		t.Run(score, func(t *testing.T) {
			key := freshKey(t, c)
			if err := c.Do(ctx, "ZADD", key, score, "hostile").Err(); err != nil {
				t.Fatal(err)
			}
			a := core.NewScriptArgs(&p, bkT0, 1)
			a.Lease = 1<<63 + 1
			_, _, want := Concurrency{}.Acquire(nil, bkT0, a.Lease, &p)
			if got := core.ScriptDecision(runLua(t, c, s, key, a)); got != want {
				t.Fatalf("acquire: Lua %+v, Go (as a fresh key) %+v", got, want)
			}
			if m := c.ZRange(ctx, key, 0, -1).Val(); !slices.Equal(m, []string{fmt.Sprint(a.Lease)}) {
				t.Fatalf("after the acquire the key holds %q, want the lease alone", m)
			}
			if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 {
				t.Fatalf("after the acquire the key's PTTL is %v", ttl)
			}
			// The set holds the lease and, again, the unusable score: a
			// release finds no state of the step's, so nothing to release.
			if err := c.Do(ctx, "ZADD", key, score, "hostile").Err(); err != nil {
				t.Fatal(err)
			}
			before := dumpKey(t, c, key)
			a.Op = store.OpRelease
			if got := runLua(t, c, s, key, a); got != (store.ScriptResult{0, 2, 0, 0, 0, 0}) {
				t.Fatalf("release: %v, want nothing released", got)
			}
			if dumpKey(t, c, key) != before {
				t.Fatalf("the release wrote")
			}
		})
	}
}
