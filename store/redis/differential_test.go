package redis

import (
	"math/rand/v2"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// The algorithm package compares each Lua twin with its Go step by raw
// EVAL; these tests compare them through the store (its argument encoding,
// its reply decoding, its batcher) on the real server and the real cluster.

func scriptedAlgorithms() []core.Algorithm {
	return []core.Algorithm{
		algorithm.FixedWindow{}, algorithm.SlidingLog{}, algorithm.SlidingCounter{},
		algorithm.TokenBucket{}, algorithm.GCRA{}, algorithm.LeakyBucket{}, algorithm.Concurrency{},
	}
}

// diffOp is one call of a differential sequence.
type diffOp struct {
	dt      time.Duration // clock step before the call; may be negative
	n       int64         // cost
	release int           // for a Leaser, > 0: release the release-th oldest lease held instead
}

// randomPolicy draws a policy that alg accepts.
func randomPolicy(r *rand.Rand, alg core.Algorithm) core.Policy {
	for {
		windows := []time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour}
		limits := []int64{1, 2, 3, 10, 100}
		p := core.Policy{Name: "diff", Limit: limits[r.IntN(len(limits))], Window: windows[r.IntN(len(windows))]}
		switch r.IntN(3) {
		case 1:
			p.Burst = 1 + r.Int64N(2*p.Limit)
		case 2:
			p.MaxDelay = p.Window / time.Duration(1+r.IntN(4))
		}
		if r.IntN(3) == 0 {
			p.LeaseTTL = p.Window * time.Duration(1+r.IntN(3))
		}
		if p.Validate() != nil {
			continue
		}
		if c, ok := alg.(core.PolicyChecker); ok && c.CheckPolicy(&p) != nil {
			continue
		}
		return p
	}
}

// randomOps draws count calls with clock steps around the policy's
// interval and window (some backwards) and costs up to quota.
func randomOps(r *rand.Rand, p *core.Policy, quota int64, count int) []diffOp {
	w, iv := p.Window, core.Micros(p.IntervalMicros())
	steps := []time.Duration{0, time.Microsecond, iv / 2, iv, iv + time.Microsecond, 2 * iv, w / 3, w / 2,
		w - time.Microsecond, w, w + time.Microsecond, 3 * w, -iv, -w / 4}
	ops := make([]diffOp, count)
	for i := range ops {
		ops[i].dt = steps[r.IntN(len(steps))]
		switch x := r.IntN(10); {
		case x < 6:
			ops[i].n = 1
		case x < 8:
			ops[i].n = 1 + r.Int64N(quota)
		default:
			ops[i].n = quota
		}
		if r.IntN(4) == 0 {
			ops[i].release = 1 + r.IntN(3)
		}
	}
	return ops
}

// diffThroughStore runs ops through the Go step and through s, from start,
// and fails at the first decision on which they differ.
//
// The injected clock and the server's clock part ways: a key's TTL (the
// step's, which the script sets with PX) runs out in real time, while the
// injected clock may stand still or step back. When a key's TTL may have
// run out in real time, both sides start over from a fresh key, so that
// they always decide on the same state.
func diffThroughStore(t *testing.T, s *Store, admin goredis.UniversalClient, alg core.Algorithm, p core.Policy, start int64, ops []diffOp) {
	t.Helper()
	sc := alg.(core.Scripted).Script()
	leaser, _ := alg.(core.Leaser)
	key := testKey(t, admin)
	var state []byte
	var expires time.Time // in real time, of the last write; with a margin
	write := func(next []byte, ttl time.Duration) {
		if next != nil {
			state = next
			expires = time.Now().Add(ttl - 100*time.Millisecond)
		}
	}
	now := start
	var held []uint64
	lease := uint64(1) << 60 // above 2^53: the id must cross Lua as a decimal string
	for i, o := range ops {
		if state != nil && !time.Now().Before(expires) {
			if err := admin.Del(ctxT(t), key.String()).Err(); err != nil {
				t.Fatal(err)
			}
			state, held = nil, nil
		}
		now = max(now+int64(o.dt/time.Microsecond), 1)
		a := core.NewScriptArgs(&p, now, o.n)
		var next []byte
		var want core.Decision
		switch {
		case leaser != nil && o.release > 0 && len(held) > 0:
			j := (o.release - 1) % len(held)
			id := held[j]
			held = append(held[:j], held[j+1:]...)
			var ttl time.Duration
			next, ttl = leaser.Release(clone(state), now, id, &p)
			a.N, a.Lease, a.Op = 1, id, store.OpRelease
			if _, err := s.RunScript(ctxT(t), sc, key, a); err != nil {
				t.Fatalf("%s %v: release %d: %v", alg.Name(), p, i, err)
			}
			write(next, ttl)
			continue
		case leaser != nil:
			var ttl time.Duration
			lease += 7919
			next, ttl, want = leaser.Acquire(clone(state), now, lease, &p)
			a.N, a.Lease = 1, lease
			if want.Allowed {
				held = append(held, lease)
			}
			write(next, ttl)
		default:
			var ttl time.Duration
			next, ttl, want = alg.Step(clone(state), now, o.n, &p)
			write(next, ttl)
		}
		r, err := s.RunScript(ctxT(t), sc, key, a)
		if err != nil {
			t.Fatalf("%s %v: call %d: %v", alg.Name(), p, i, err)
		}
		if got := core.ScriptDecision(r); got != want {
			t.Fatalf("%s %v: call %d (now=%d, n=%d, dt=%v):\n store %+v\n Go    %+v", alg.Name(), p, i, now, a.N, o.dt, got, want)
		}
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func TestDifferential(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	for _, tc := range []struct {
		name  string
		store func(testing.TB, *Options) *Store
	}{{"single", newStore}, {"cluster", newClusterStore}} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.store(t, nil)
			for _, alg := range scriptedAlgorithms() {
				t.Run(alg.Name(), func(t *testing.T) {
					r := rand.New(rand.NewPCG(seed, uint64(len(alg.Name()))))
					for range 8 {
						p := randomPolicy(r, alg)
						start := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro() + r.Int64N(int64(80*365*24*time.Hour/time.Microsecond))
						diffThroughStore(t, s, s.Client(), alg, p, start, randomOps(r, &p, alg.Quota(&p), 40))
					}
				})
			}
		})
	}
}

// FuzzDifferential decodes an algorithm, a policy seed, a start time and a
// sequence of (clock step, cost) pairs from the input and runs them
// through the store on the real server. `go test` runs the seed corpus;
// `go test -fuzz FuzzDifferential` searches further.
func FuzzDifferential(f *testing.F) {
	f.Add(uint8(0), uint64(1), int64(1_700_000_000_000_000), []byte{0, 1, 5, 1, 200, 2, 9, 1})
	f.Add(uint8(4), uint64(2), int64(1), []byte{255, 1, 0, 3, 128, 1})
	f.Add(uint8(5), uint64(3), int64(4_000_000_000_000_000), []byte{1, 1, 1, 1, 1, 1, 0, 2})
	f.Add(uint8(6), uint64(4), int64(1_700_000_000_000_000), []byte{0, 1, 0, 1, 0, 1, 7, 0, 3, 1})
	s := newStore(f, nil)
	f.Fuzz(func(t *testing.T, which uint8, pseed uint64, start int64, data []byte) {
		algs := scriptedAlgorithms()
		alg := algs[int(which)%len(algs)]
		r := rand.New(rand.NewPCG(pseed, 0))
		p := randomPolicy(r, alg)
		start = max(start%(1<<52), 1)
		ops := make([]diffOp, 0, len(data)/2)
		for i := 0; i+1 < len(data) && len(ops) < 64; i += 2 {
			// dt: a signed byte times a fiftieth of the window, so steps
			// cross windows and intervals both ways.
			dt := time.Duration(int8(data[i])) * p.Window / 50
			n := 1 + int64(data[i+1])%alg.Quota(&p)
			o := diffOp{dt: dt, n: n}
			if data[i+1] >= 200 {
				o.release = int(data[i+1] - 199)
			}
			ops = append(ops, o)
		}
		diffThroughStore(t, s, s.Client(), alg, p, start, ops)
	})
}
