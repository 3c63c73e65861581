package valkey_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// allAlgorithms are the seven algorithms of package algorithm, each with a
// Lua twin.
var allAlgorithms = []core.Algorithm{
	algorithm.FixedWindow{}, algorithm.SlidingLog{}, algorithm.SlidingCounter{},
	algorithm.TokenBucket{}, algorithm.GCRA{}, algorithm.LeakyBucket{}, algorithm.Concurrency{},
}

// diffPolicies span the knobs: tiny and large limits, bursts above and
// below the limit, short and long windows, queue and lease bounds.
var diffPolicies = []core.Policy{
	{Name: "small", Limit: 5, Window: time.Second},
	{Name: "burst", Limit: 3, Window: 10 * time.Second, Burst: 7},
	{Name: "narrow", Limit: 100, Window: time.Minute, Burst: 20, MaxDelay: 5 * time.Second, LeaseTTL: 30 * time.Second},
	{Name: "one", Limit: 1, Window: time.Millisecond},
	{Name: "odd", Limit: 7, Window: 999 * time.Millisecond, Burst: 2, MaxDelay: 333 * time.Millisecond, LeaseTTL: 2 * time.Second},
}

// diffOp is one call of a differential sequence.
type diffOp struct {
	dt      time.Duration // clock step before the call; may be negative
	n       int64         // cost
	release bool          // for a Leaser: release a held lease instead
	pick    int           // which held lease
	pause   time.Duration // real time to wait before the call (random sequences: 0)
}

// randomDiffOps draws count calls with clock steps around the policy's
// interval and window (some backwards) and costs from 1 to the quota.
func randomDiffOps(r *rand.Rand, p *core.Policy, quota int64, count int) []diffOp {
	w, iv := p.Window, core.Micros(p.IntervalMicros())
	steps := []time.Duration{0, 0, time.Microsecond, iv / 2, iv - time.Microsecond, iv, iv + time.Microsecond,
		2 * iv, w / 3, w - time.Microsecond, w, w + time.Microsecond, 3 * w, -time.Microsecond, -iv, -w / 2}
	ops := make([]diffOp, count)
	for i := range ops {
		o := &ops[i]
		o.dt = steps[r.IntN(len(steps))]
		switch x := r.IntN(10); {
		case x < 6:
			o.n = 1
		case x < 9:
			o.n = 1 + r.Int64N(quota)
		default:
			o.n = quota
		}
		o.release, o.pick = r.IntN(3) == 0, r.IntN(8)
	}
	return ops
}

// TestLuaTwinsAgreeWithGoSteps runs random sequences through each
// algorithm's Go step and, through this store and valkey-go, its Lua twin
// under the same injected clock, on a server and on a cluster, and fails at
// the first decision on which they differ in any field.
func TestLuaTwinsAgreeWithGoSteps(t *testing.T) {
	const sequences, calls = 6, 60
	forEachBackend(t, func(t *testing.T, b backend) {
		s, c := newStore(t, b.addrs(t))
		for _, alg := range allAlgorithms {
			t.Run(alg.Name(), func(t *testing.T) {
				dropped := 0
				defer func() { t.Logf("%d of the calls met a key the server had expired in real time", dropped) }()
				for _, p := range diffPolicies {
					if err := checkPolicy(alg, &p); err != nil {
						continue
					}
					for seq := range sequences {
						seed := uint64(seq)<<32 | uint64(len(p.Name))<<8 | uint64(p.Limit)
						r := rand.New(rand.NewPCG(seed, 0x5eed))
						ops := randomDiffOps(r, &p, alg.Quota(&p), calls)
						start := time.Date(2026, 3, 14, 15, 20, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(time.Hour))))
						dropped += diff(t, s, c, freshKey(t, c), alg, p, start, ops, seed)
					}
				}
			})
		}
	})
}

// TestDiffFollowsAReleaseOfAnExpiredKey holds diff's model of the server to
// a release that arrives after the server dropped the key in real time: the
// release then finds nothing to release, and the key stays absent, while
// the Go step, on the state the model kept, still holds the other lease. A
// release's reply carries no decision to tell the two apart, so without
// asking the server the model carries the stale lease on, and the next
// acquire differs from the twin's by one lease (as random sequences did,
// now and then, on a loaded machine).
func TestDiffFollowsAReleaseOfAnExpiredKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, c := newStore(t, b.addrs(t))
		p := core.Policy{Name: "lease", Limit: 7, Window: time.Second, LeaseTTL: 2 * time.Second}
		ops := []diffOp{
			{n: 1},                              // A, until 2 s
			{n: 1},                              // B, until 2 s
			{dt: 1800 * time.Millisecond, n: 1}, // C, until 3.8 s
			{release: true, pick: 2},            // C goes: the key lives 200 ms more
			{release: true, pick: 0, pause: 400 * time.Millisecond}, // A, once the key has expired
			{n: 1}, // D: the only lease the server holds
		}
		start := time.Date(2026, 3, 14, 15, 20, 0, 0, time.UTC)
		diff(t, s, c, freshKey(t, c), algorithm.Concurrency{}, p, start, ops, 0)
	})
}

func checkPolicy(alg core.Algorithm, p *core.Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if c, ok := alg.(core.PolicyChecker); ok {
		return c.CheckPolicy(p)
	}
	return nil
}

// diff compares one sequence, call by call.
//
// The server expires keys by its own clock, which runs on while the
// injected clock may stand still: once the TTL of the last write has passed
// in real time, the server may have dropped the key, and the Lua twin may
// decide as for a fresh key. The Go step is then asked both ways, and the
// twin must match one of them.
//
// A release's reply carries no decision, so it cannot tell the model
// which state the release met: after each one, the model asks the server
// (c) whether the key is still there. It is absent only if the server had
// dropped it, or the release left no lease; either way the key reads as
// fresh from then on, as a nil state does. (Present, it was live when the
// release ran: an expired key is only ever dropped, and nothing else writes
// it.)
//
// It returns how many calls matched only as a fresh key.
func diff(t testing.TB, s *valkey.Store, c valkeygo.Client, key store.Key, alg core.Algorithm, p core.Policy, start time.Time, ops []diffOp, seed uint64) (dropped int) {
	t.Helper()
	sc := alg.(core.Scripted).Script()
	leaser, _ := alg.(core.Leaser)
	var state []byte
	var expires time.Time // real time after which the server may drop the key
	now := start.UnixMicro()
	var held []uint64
	nextLease := uint64(1) << 60 // above 2^53: must survive Lua as text
	for i, o := range ops {
		time.Sleep(o.pause)
		now = max(1, now+int64(o.dt/time.Microsecond))
		a := core.NewScriptArgs(&p, now, o.n)
		release := leaser != nil && o.release && len(held) > 0
		switch {
		case release:
			j := o.pick % len(held)
			a.N, a.Lease, a.Op = 1, held[j], store.OpRelease
			held = append(held[:j], held[j+1:]...)
		case leaser != nil:
			nextLease += 12345
			a.N, a.Lease = 1, nextLease
		}
		step := func(st []byte) ([]byte, time.Duration, core.Decision) {
			switch {
			case release:
				next, ttl := leaser.Release(clone(st), now, a.Lease, &p)
				return next, ttl, core.Decision{}
			case leaser != nil:
				return leaser.Acquire(clone(st), now, a.Lease, &p)
			}
			return alg.Step(clone(st), now, o.n, &p)
		}
		began := time.Now()
		expired := state != nil && !began.Before(expires) // the server may have dropped the key
		r, err := s.RunScript(context.Background(), sc, key, a)
		if err != nil {
			t.Fatalf("%s %v seed %#x call %d: %v", alg.Name(), p, seed, i, err)
		}
		next, ttl, want := step(state)
		got := core.ScriptDecision(r)
		if release {
			got = core.Decision{} // a release's reply carries no decision
		}
		if got != want && state != nil && !time.Now().Before(expires) {
			if n2, ttl2, w2 := step(nil); got == w2 {
				next, ttl, want = n2, ttl2, w2
				dropped++
			}
		}
		if got != want {
			t.Fatalf("%s %v seed %#x call %d (now=%d n=%d dt=%v):\n Lua %+v\n Go  %+v", alg.Name(), p, seed, i, now, a.N, o.dt, got, want)
		}
		if leaser != nil && !release && want.Allowed {
			held = append(held, a.Lease)
		}
		if next != nil {
			state, expires = next, began.Add(ttl.Truncate(time.Millisecond))
		}
		if release {
			n, err := c.Do(context.Background(), c.B().Exists().Key(key.String()).Build()).AsInt64()
			if err != nil {
				t.Fatalf("%s %v seed %#x call %d: EXISTS: %v", alg.Name(), p, seed, i, err)
			}
			if n == 0 {
				if expired {
					dropped++
				}
				state = nil
			}
		}
	}
	return dropped
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// FuzzLuaTwin drives the same comparison from fuzzed seeds, on the single
// server: go test runs the seed corpus; go test -fuzz explores.
func FuzzLuaTwin(f *testing.F) {
	for i := range 4 {
		f.Add(uint64(i)*0x9e3779b97f4a7c15, uint8(i), uint8(i))
	}
	f.Fuzz(func(t *testing.T, seed uint64, algIndex, policyIndex uint8) {
		alg := allAlgorithms[int(algIndex)%len(allAlgorithms)]
		p := diffPolicies[int(policyIndex)%len(diffPolicies)]
		if checkPolicy(alg, &p) != nil {
			t.Skip("policy not valid for this algorithm")
		}
		s, c := newStore(t, backends[0].addrs(t))
		r := rand.New(rand.NewPCG(seed, 0xf022))
		start := time.Date(2026, 3, 14, 15, 20, 0, 0, time.UTC).Add(time.Duration(r.Int64N(int64(time.Hour))))
		diff(t, s, c, freshKey(t, c), alg, p, start, randomDiffOps(r, &p, alg.Quota(&p), 30), seed)
	})
}
