package algorithm

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// Test helpers shared by the token bucket, GCRA, leaky bucket and
// concurrency tests.

// bkT0 is the instant the table tests start at: 2026-04-12, in µs.
const bkT0 = 1_776_000_000_000_000

// bkCall is one row of a table test: a Step at an explicit time, and
// everything it must return.
type bkCall struct {
	at   int64 // µs since the epoch
	n    int64
	want core.Decision
	ttl  time.Duration // 0 when nothing is written
}

// admit is the decision for an admission; times in µs.
func admit(limit, remaining, resetUS, delayUS int64) core.Decision {
	return core.Decision{Allowed: true, Limit: limit, Remaining: remaining,
		ResetAfter: core.Micros(resetUS), Delay: core.Micros(delayUS)}
}

// deny is the decision for a denial; times in µs.
func deny(limit, remaining, retryUS, resetUS int64) core.Decision {
	return core.Decision{Limit: limit, Remaining: remaining,
		RetryAfter: core.Micros(retryUS), ResetAfter: core.Micros(resetUS)}
}

// runCalls runs calls in order on one key's state, from state, and returns
// the final state.
func runCalls(t *testing.T, alg core.Algorithm, p core.Policy, state []byte, calls []bkCall) []byte {
	t.Helper()
	for i, c := range calls {
		next, ttl, d := alg.Step(clone(state), c.at, c.n, &p)
		if d != c.want {
			t.Fatalf("call %d (at t0%+d µs, n=%d):\n got  %+v\n want %+v", i, c.at-bkT0, c.n, d, c.want)
		}
		if ttl != c.ttl {
			t.Fatalf("call %d (at t0%+d µs, n=%d): ttl %v, want %v", i, c.at-bkT0, c.n, ttl, c.ttl)
		}
		if (next != nil) != d.Allowed {
			t.Fatalf("call %d: next = %x with Allowed %v: a denial writes nothing, an admission writes", i, next, d.Allowed)
		}
		if next != nil {
			state = next
		}
	}
	return state
}

// stepOnce is one Step on a copy of state, which it leaves untouched.
func stepOnce(alg core.Algorithm, p *core.Policy, state []byte, now, n int64) ([]byte, time.Duration, core.Decision) {
	return alg.Step(clone(state), now, n, p)
}

// checkUndecodable checks that each state in bad decides as no state.
func checkUndecodable(t *testing.T, alg core.Algorithm, p core.Policy, bad [][]byte) {
	t.Helper()
	for _, s := range bad {
		for _, n := range []int64{1, alg.Quota(&p)} {
			gn, gt, gd := stepOnce(alg, &p, s, bkT0, n)
			wn, wt, wd := stepOnce(alg, &p, nil, bkT0, n)
			if gd != wd || gt != wt || !bytes.Equal(gn, wn) {
				t.Errorf("state %x, n=%d: got %+v ttl %v next %x; want as no state: %+v ttl %v next %x", s, n, gd, gt, gn, wd, wt, wn)
			}
		}
	}
}

// checkFreshAfterTTL checks that state, written at now with ttl, decides as
// no state at now+ttl (and later) and not at now+ttl−1.
func checkFreshAfterTTL(t *testing.T, alg core.Algorithm, p *core.Policy, state []byte, now int64, ttl time.Duration) {
	t.Helper()
	end := now + int64(ttl/time.Microsecond)
	for _, at := range []int64{end, end + 1, end + 7*p.WindowMicros()} {
		gn, gt, gd := stepOnce(alg, p, state, at, 1)
		wn, wt, wd := stepOnce(alg, p, nil, at, 1)
		if gd != wd || gt != wt || !bytes.Equal(gn, wn) {
			t.Fatalf("state %x written at %d with ttl %v: at %d it decides %+v (ttl %v), a fresh key %+v (ttl %v)", state, now, ttl, at, gd, gt, wd, wt)
		}
	}
	_, _, gd := stepOnce(alg, p, state, end-1, 1)
	_, _, wd := stepOnce(alg, p, nil, end-1, 1)
	if gd == wd {
		t.Fatalf("state %x written at %d with ttl %v already decides as a fresh key 1µs before: ttl is not minimal", state, now, ttl)
	}
}

// checkAtOneInstant checks that, from a fresh key, calls of random costs at
// one instant admit exactly total units before the first denial of a cost
// of 1.
func checkAtOneInstant(t *testing.T, alg core.Algorithm, p core.Policy, total int64, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	q := alg.Quota(&p)
	var state []byte
	admitted := int64(0)
	for range 100_000 {
		// Mostly a cost that fits what the total leaves, sometimes any
		// cost; the loop ends when even 1 unit is denied.
		n := 1 + r.Int64N(q)
		if r.IntN(4) > 0 {
			n = 1 + r.Int64N(max(1, min(q, total-admitted)))
		}
		next, _, d := stepOnce(alg, &p, state, bkT0, n)
		if d.Allowed {
			admitted += n
			state = next
		}
		if _, _, d := stepOnce(alg, &p, state, bkT0, 1); !d.Allowed {
			break
		}
	}
	if admitted != total {
		t.Fatalf("%s %v: admitted %d units at one instant, want exactly %d", alg.Name(), p, admitted, total)
	}
}

// checkZeroAllocs checks that a decision on an existing key allocates
// nothing: Step writes next into the state it was given.
func checkZeroAllocs(t *testing.T, alg core.Algorithm, p core.Policy) {
	t.Helper()
	state, _, _ := alg.Step(nil, bkT0, 1, &p)
	now := int64(bkT0)
	iv := max(1, p.IntervalMicros()/2)
	allocs := testing.AllocsPerRun(1000, func() {
		now += iv
		if next, _, _ := alg.Step(state, now, 1, &p); next != nil {
			state = next
		}
	})
	if allocs != 0 {
		t.Errorf("%s: %v allocations per Step on an existing key, want 0", alg.Name(), allocs)
	}
}

// ---- fuzzing ----

// bkFuzzPolicy builds a policy from fuzz inputs; ok is false when it is not
// valid.
func bkFuzzPolicy(limit, windowMs, burst, maxDelay uint32) (p core.Policy, ok bool) {
	p = core.Policy{
		Name:   "fuzz",
		Limit:  int64(limit%3000) + 1,
		Window: time.Duration(windowMs%3_600_000+1) * time.Millisecond,
		Burst:  int64(burst % 3000),
	}
	if maxDelay != 0 {
		p.MaxDelay = time.Duration(int64(maxDelay)%(3*p.WindowMicros())+1) * time.Microsecond
	}
	return p, p.Validate() == nil
}

// bkFuzzStep is a clock step drawn from a: around the interval and the
// window, forwards and backwards.
func bkFuzzStep(a byte, iv, w int64) int64 {
	switch a % 16 {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return iv - 1
	case 3:
		return iv
	case 4:
		return iv + 1
	case 5:
		return 2 * iv
	case 6:
		return iv / 2
	case 7:
		return w
	case 8:
		return w / 3
	case 9:
		return -1
	case 10:
		return -iv
	case 11:
		return -w / 4
	case 12:
		return int64(a) * 7919 % (iv + 1)
	case 13:
		return 10 * w
	case 14:
		return int64(a>>4) * iv / 3
	}
	return 0
}

// bkFuzzCost is a cost in 1..quota drawn from b.
func bkFuzzCost(b byte, quota int64) int64 {
	switch b % 4 {
	case 0:
		return 1
	case 1:
		return quota
	case 2:
		return 1 + int64(b)%quota
	}
	return min(2, quota)
}

// bkAdmission is one admitted request, for the bound checks.
type bkAdmission struct {
	now, n, delay int64
}

// bkFuzzRate drives alg through the operations encoded in ops (two bytes
// each: clock step, cost) from a fresh key and checks every decision: the
// decision's invariants, that Remaining, RetryAfter, ResetAfter and the ttl
// are exact (by probing the step at the times they name), and at the end
// the admission bound, which bound checks on the record of admissions.
func bkFuzzRate(t *testing.T, alg core.Algorithm, p core.Policy, ops []byte, bound func(*testing.T, []bkAdmission)) {
	q := alg.Quota(&p)
	iv, w := p.IntervalMicros(), p.WindowMicros()
	_, leaky := alg.(LeakyBucket)
	if len(ops) > 1200 {
		ops = ops[:1200]
	}
	var state []byte
	now := int64(bkT0)
	var adm []bkAdmission
	for i := 0; i+1 < len(ops); i += 2 {
		now = max(now+bkFuzzStep(ops[i], iv, w), 0)
		n := bkFuzzCost(ops[i+1], q)
		next, ttl, d := stepOnce(alg, &p, state, now, n)
		where := fmt.Sprintf("%s %v: op %d (now=t0%+d, n=%d) -> %+v, ttl %v", alg.Name(), p, i/2, now-bkT0, n, d, ttl)
		if d.Limit != q || d.Remaining < 0 || d.Remaining > q || d.ResetAfter < 0 || d.Delay < 0 {
			t.Fatalf("%s: a field out of range", where)
		}
		if d.Allowed != (next != nil) || (ttl > 0) != (next != nil) {
			t.Fatalf("%s: an admission must write with ttl > 0, a denial nothing", where)
		}
		if d.Allowed == (d.RetryAfter > 0) {
			t.Fatalf("%s: RetryAfter must be > 0 exactly on a denial", where)
		}
		if d.Delay > core.Micros(p.MaxDelayMicros()) || (!leaky && d.Delay != 0) || (!d.Allowed && d.Delay != 0) {
			t.Fatalf("%s: Delay out of place", where)
		}
		after := state
		if next != nil {
			after = next
		}
		// Remaining: that many more now are admitted, one more is not.
		if r := d.Remaining; r >= 1 {
			if _, _, e := stepOnce(alg, &p, after, now, r); !e.Allowed {
				t.Fatalf("%s: a request for Remaining units is denied: %+v", where, e)
			}
		}
		if r := d.Remaining + 1; r <= q {
			if _, _, e := stepOnce(alg, &p, after, now, r); e.Allowed {
				t.Fatalf("%s: a request for Remaining+1 units is admitted: %+v", where, e)
			}
		}
		// RetryAfter: the same request then is admitted, 1µs earlier not.
		if !d.Allowed {
			ra := int64(d.RetryAfter / time.Microsecond)
			if _, _, e := stepOnce(alg, &p, state, now+ra, n); !e.Allowed {
				t.Fatalf("%s: denied again after RetryAfter: %+v", where, e)
			}
			if _, _, e := stepOnce(alg, &p, state, now+ra-1, n); e.Allowed {
				t.Fatalf("%s: admitted 1µs before RetryAfter: %+v", where, e)
			}
		}
		// ResetAfter: the whole quota is back then, and not 1µs earlier.
		reset := int64(d.ResetAfter / time.Microsecond)
		if _, _, e := stepOnce(alg, &p, after, now+reset, q); !e.Allowed {
			t.Fatalf("%s: the whole quota is not back after ResetAfter: %+v", where, e)
		}
		if reset > 0 {
			if _, _, e := stepOnce(alg, &p, after, now+reset-1, q); e.Allowed {
				t.Fatalf("%s: the whole quota is back 1µs before ResetAfter: %+v", where, e)
			}
		}
		if next != nil {
			checkFreshAfterTTL(t, alg, &p, next, now, ttl)
			adm = append(adm, bkAdmission{now: now, n: n, delay: int64(d.Delay / time.Microsecond)})
			state = next
		}
	}
	bound(t, adm)
}

// checkIntervalBound checks that for any interval [t1, t2], the units of
// the admissions whose time (by at) lies in it number at most base +
// ⌊(t2 − t1 + slack)/T⌋.
func checkIntervalBound(t *testing.T, name string, adm []bkAdmission, at func(i int) int64, base, slack, iv int64) {
	t.Helper()
	idx := make([]int, len(adm))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(at(a), at(b)) })
	// For each first admission i, the sum over every j >= i grows with j;
	// a bound violated by some interval is violated by one whose ends are
	// admission times.
	for i := range idx {
		sum := int64(0)
		for j := i; j < len(idx); j++ {
			sum += adm[idx[j]].n
			// Only intervals that end after the last tie of j count: the
			// others hold fewer admissions for the same length.
			if j+1 < len(idx) && at(idx[j+1]) == at(idx[j]) {
				continue
			}
			if lim := base + (at(idx[j])-at(idx[i])+slack)/iv; sum > lim {
				t.Fatalf("%s: %d units admitted in [t0%+d, t0%+d], bound %d", name, sum, at(idx[i])-bkT0, at(idx[j])-bkT0, lim)
			}
		}
	}
}

// floorDiv is ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ---- Lua ----

// bkRatePolicies are the policies the bucket algorithms' Lua twins are
// checked under.
var bkRatePolicies = []core.Policy{
	{Name: "burst-is-limit", Limit: 10, Window: time.Second},
	{Name: "small-burst", Limit: 10, Window: time.Second, Burst: 3},
	{Name: "large-burst", Limit: 5, Window: time.Second, Burst: 40},
	{Name: "limit-1", Limit: 1, Window: time.Minute},
	{Name: "large-limit", Limit: 1_000_000, Window: time.Second},
	{Name: "not-dividing", Limit: 7, Window: time.Second, Burst: 9},
	{Name: "short", Limit: 3, Window: 10 * time.Millisecond, Burst: 2},
	{Name: "long", Limit: 100, Window: 30 * 24 * time.Hour, Burst: 1000},
}

// diffBucket compares alg's Lua twin with its Go step over seqs random
// sequences of count operations under each policy, on a real redis-server.
func diffBucket(t *testing.T, alg core.Algorithm, policies []core.Policy, seqs, count int) {
	c := newRedis(t)
	for _, p := range policies {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(uint64(len(p.Name)), uint64(p.Limit)))
			for s := range seqs {
				start := time.UnixMicro(bkT0 + r.Int64N(1e12))
				ops := randomOps(r, &p, alg.Quota(&p), count)
				t.Run(strconv.Itoa(s), func(t *testing.T) {
					diffLua(t, c, alg, p, start, ops, diffOptions{injectedExpiry: true})
				})
			}
		})
	}
}

// checkServerTime runs alg's twin with now = 0 (the server's TIME) on a
// fresh key: it must admit, with the quota less one left.
func checkServerTime(t *testing.T, alg core.Algorithm, p core.Policy) {
	c := newRedis(t)
	key := freshKey(t, c)
	a := core.NewScriptArgs(&p, 0, 1)
	a.Lease = 1 << 63
	got := core.ScriptDecision(runLua(t, c, alg.(core.Scripted).Script(), key, a))
	q := alg.Quota(&p)
	if !got.Allowed || got.Limit != q || got.Remaining != q-1 {
		t.Fatalf("%s with the server's clock, on a fresh key: %+v, want admitted with %d of %d left", alg.Name(), got, q-1, q)
	}
	if pttl := c.PTTL(context.Background(), key).Val(); pttl <= 0 {
		t.Fatalf("%s: the key has no expiry (PTTL %v)", alg.Name(), pttl)
	}
}

// memoryUsage runs alg's twin twice on a standard key (prefix, the
// policy's name, an identity's hash) at a realistic now, and returns the
// key's length, its MEMORY USAGE and its OBJECT ENCODING.
func memoryUsage(t *testing.T, alg core.Algorithm, p core.Policy, prefix string) (keyLen int, usage int64, encoding string) {
	c := newRedis(t)
	key := store.Key{Namespace: store.Namespace(prefix, p.Name), Identity: "203.0.113.7/" + alg.Name()}.String()
	ctx := context.Background()
	c.Del(ctx, key)
	t.Cleanup(func() { c.Del(ctx, key) })
	s := alg.(core.Scripted).Script()
	now := time.Now().UnixMicro()
	for i := range 2 {
		a := core.NewScriptArgs(&p, now, 1)
		a.Lease = 1<<63 + uint64(i)
		// Held: PERSISTed in the script's own transaction, so that a key
		// whose TTL is a few µs (a bucket refilled almost at once) cannot
		// expire in real time before it is measured.
		if r, _ := runLuaHeld(t, c, s, key, a); !core.ScriptDecision(r).Allowed {
			t.Fatalf("%s: denied on a fresh key: %+v", alg.Name(), core.ScriptDecision(r))
		}
	}
	usage, err := c.MemoryUsage(ctx, key).Result()
	if err != nil {
		t.Fatalf("MEMORY USAGE: %v", err)
	}
	encoding, err = c.ObjectEncoding(ctx, key).Result()
	if err != nil {
		t.Fatalf("OBJECT ENCODING: %v", err)
	}
	return len(key), usage, encoding
}

// checkIntState checks that alg's twin keeps its state as one integer,
// which Redis stores in 16 bytes, and that MEMORY USAGE is then at most 100
// bytes for a standard key: the default prefix and a policy name of up to 12
// characters make a key of at most 44 bytes, the longest whose name Redis
// allocates in 48 bytes. (A longer policy name makes it 104.)
func checkIntState(t *testing.T, alg core.Algorithm, p core.Policy) {
	t.Helper()
	for _, name := range []string{"api", "login-per-ip"} {
		p.Name = name
		n, usage, enc := memoryUsage(t, alg, p, core.DefaultPrefix)
		if enc != "int" || n > 44 || usage > 100 {
			t.Errorf("%s: a %d-byte key is stored as %q and MEMORY USAGE is %d bytes; want \"int\", at most 44 and 100", alg.Name(), n, enc, usage)
		}
		t.Logf("%s: MEMORY USAGE %d bytes with a %d-byte key (policy %q)", alg.Name(), usage, n, name)
	}
}

// checkOnCluster runs alg's twin on a real Redis Cluster for a short random
// sequence and compares it with the Go step: the script touches KEYS[1]
// only, so the cluster accepts it. The policy's interval must be long
// enough that no key expires in real time during the test (clock steps are
// whole intervals, so every ttl is at least one interval).
func checkOnCluster(t *testing.T, alg core.Algorithm, p core.Policy, lease func(i int) uint64) {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.RedisClusterAddrs(t), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	s := alg.(core.Scripted).Script()
	leaser, _ := alg.(core.Leaser)
	r := rand.New(rand.NewPCG(7, 7))
	for k := range 8 {
		key := fmt.Sprintf("sluice-test:%s:%d:{%d}", t.Name(), time.Now().UnixNano(), k)
		t.Cleanup(func() { c.Del(ctx, key) })
		var state []byte
		now := int64(bkT0)
		for i := range 40 {
			now += r.Int64N(3) * p.IntervalMicros()
			n := 1 + r.Int64N(alg.Quota(&p))
			var want core.Decision
			var next []byte
			a := core.NewScriptArgs(&p, now, n)
			if leaser != nil {
				a.N, a.Lease = 1, lease(i)
				next, _, want = leaser.Acquire(clone(state), now, a.Lease, &p)
			} else {
				next, _, want = alg.Step(clone(state), now, n, &p)
			}
			if next != nil {
				state = next
			}
			v, err := c.Eval(ctx, s.Source, []string{key}, luaArgv(s, &a)...).Result()
			if err != nil {
				t.Fatalf("%s on the cluster: EVAL: %v %v", alg.Name(), v, err)
			}
			if got := core.ScriptDecision(luaReply(t, s, &a, v)); got != want {
				t.Fatalf("%s on the cluster, call %d: Lua %+v, Go %+v", alg.Name(), i, got, want)
			}
		}
	}
}

// ---- benchmarks ----

// benchStep measures Step on an existing key, the clock moving by half an
// interval per call, so that admissions and denials alternate.
func benchStep(b *testing.B, alg core.Algorithm, p core.Policy) {
	b.ReportAllocs()
	state, _, _ := alg.Step(nil, bkT0, 1, &p)
	now, step := int64(bkT0), max(1, p.IntervalMicros()/2)
	for b.Loop() {
		now += step
		if next, _, _ := alg.Step(state, now, 1, &p); next != nil {
			state = next
		}
	}
}

// benchStepParallel is benchStep on one key per goroutine.
func benchStepParallel(b *testing.B, alg core.Algorithm, p core.Policy) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		state, _, _ := alg.Step(nil, bkT0, 1, &p)
		now, step := int64(bkT0), max(1, p.IntervalMicros()/2)
		for pb.Next() {
			now += step
			if next, _, _ := alg.Step(state, now, 1, &p); next != nil {
				state = next
			}
		}
	})
}

// checkForeignKey checks that alg's twin reads a key it did not write (a
// string of garbage, or a key of another type) as absent, as the Go step
// reads undecodable state, and replaces it when it admits.
func checkForeignKey(t *testing.T, alg core.Algorithm, p core.Policy) {
	c := newRedis(t)
	ctx := context.Background()
	s := alg.(core.Scripted).Script()
	_, _, want := alg.Step(nil, bkT0, 1, &p)
	for _, set := range []func(key string) error{
		func(key string) error { return c.Set(ctx, key, "not a state", 0).Err() },
		func(key string) error { return c.HSet(ctx, key, "f", "v").Err() },
		func(key string) error { return c.ZAdd(ctx, key, redis.Z{Score: 1, Member: "x"}).Err() },
	} {
		key := freshKey(t, c)
		if err := set(key); err != nil {
			t.Fatal(err)
		}
		a := core.NewScriptArgs(&p, bkT0, 1)
		a.Lease = 1 << 63
		if got := core.ScriptDecision(runLua(t, c, s, key, a)); got != want {
			t.Fatalf("%s on a foreign key: %+v, want as a fresh key %+v", alg.Name(), got, want)
		}
		// The key now holds the twin's own state: the next call sees it.
		_, _, want2 := alg.Step(clone(mustStep(t, alg, p)), bkT0, 1, &p)
		a.Lease++
		if got := core.ScriptDecision(runLua(t, c, s, key, a)); got != want2 {
			t.Fatalf("%s after replacing a foreign key: %+v, want %+v", alg.Name(), got, want2)
		}
	}
}

// mustStep is the state after one admission of 1 unit at bkT0 on a fresh
// key.
func mustStep(t *testing.T, alg core.Algorithm, p core.Policy) []byte {
	t.Helper()
	next, _, d := alg.Step(nil, bkT0, 1, &p)
	if !d.Allowed {
		t.Fatalf("%s: 1 unit denied on a fresh key", alg.Name())
	}
	return next
}

func TestBucketsLuaForeignKey(t *testing.T) {
	for _, alg := range []core.Algorithm{TokenBucket{}, GCRA{}, LeakyBucket{}, Concurrency{}} {
		t.Run(alg.Name(), func(t *testing.T) {
			checkForeignKey(t, alg, core.Policy{Name: "f", Limit: 5, Window: time.Minute})
		})
	}
}

// A cost the Limiter never sends (n < 1 or above the quota) is denied
// without a retry time by the twins as by the Go steps, and writes nothing.
func TestBucketsLuaInvalidCost(t *testing.T) {
	c := newRedis(t)
	for _, alg := range []core.Algorithm{TokenBucket{}, GCRA{}, LeakyBucket{}} {
		for _, p := range []core.Policy{tbPolicy, lbPolicy} {
			state := mustStep(t, alg, p)
			key := freshKey(t, c)
			a := core.NewScriptArgs(&p, bkT0, 1)
			runLua(t, c, alg.(core.Scripted).Script(), key, a)
			for _, n := range []int64{0, -3, alg.Quota(&p) + 1} {
				_, _, want := stepOnce(alg, &p, state, bkT0+1, n)
				before := dumpKey(t, c, key)
				a := core.NewScriptArgs(&p, bkT0+1, n)
				if got := core.ScriptDecision(runLua(t, c, alg.(core.Scripted).Script(), key, a)); got != want || got.Allowed || got.RetryAfter != 0 {
					t.Errorf("%s %v, n=%d: Lua %+v, Go %+v", alg.Name(), p, n, got, want)
				}
				if dumpKey(t, c, key) != before {
					t.Errorf("%s, n=%d: the script wrote", alg.Name(), n)
				}
			}
		}
	}
}
