package algorithm

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
)

// multiAlgs are the algorithms the multi-limit script holds.
func multiAlgs() []core.Algorithm {
	return []core.Algorithm{FixedWindow{}, SlidingLog{}, SlidingCounter{}, TokenBucket{}, GCRA{}, LeakyBucket{},
		Calendar{Period: Day, Location: mustLoc("Europe/Berlin")}}
}

func mustLoc(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

// TestMultiScriptMatchesGoSteps runs random sets of one to three limits
// through the multi-limit script and through the Go steps, all or nothing,
// and compares every limit's six integers, call by call, and the state
// written: a refusal writes no key.
func TestMultiScriptMatchesGoSteps(t *testing.T) {
	c := newRedis(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(13, 1))
	algs := multiAlgs()
	for round := 0; round < 60; round++ {
		k := 1 + r.IntN(3)
		type lim struct {
			alg   core.Algorithm
			p     core.Policy
			state []byte
			key   string
		}
		ls := make([]lim, k)
		var keys []string
		for i := range ls {
			a := algs[r.IntN(len(algs))]
			p := core.Policy{Name: "l" + string(rune('a'+i)), Limit: 1 + r.Int64N(6), Window: time.Duration(1+r.IntN(3)) * time.Second}
			if r.IntN(2) == 0 {
				p.Burst = 1 + r.Int64N(8)
			}
			if _, ok := a.(Calendar); ok {
				p.Window = 24 * time.Hour
			}
			ls[i] = lim{alg: a, p: p, key: freshKey(t, c)}
			keys = append(keys, ls[i].key)
		}
		// Start a little before a Berlin midnight, so calendar periods roll.
		now := time.Date(2026, 3, 29, 0, 0, 0, 0, mustLoc("Europe/Berlin")).UnixMicro() - int64(r.IntN(5_000_000))
		if r.IntN(2) == 0 {
			now = time.Date(2026, 10, 24, 23, 59, 58, 0, mustLoc("Europe/Berlin")).UnixMicro()
		}
		for step := 0; step < 40; step++ {
			now += []int64{0, 1, 1000, 250_000, 700_000, 1_000_000, 2_500_000}[r.IntN(7)]
			n := int64(1)
			if r.IntN(4) == 0 {
				n = 2
			}
			quota := int64(1 << 62)
			for _, l := range ls {
				quota = min(quota, l.alg.Quota(&l.p))
			}
			n = min(n, quota)
			args := []int64{now, int64(k)}
			for _, l := range ls {
				args = l.alg.(core.MultiScripted).AppendMultiArgs(args, &l.p, now, n)
			}
			argv := make([]any, len(args))
			for i, a := range args {
				argv[i] = a
			}
			before := make([]string, k)
			for i := range ls {
				before[i] = dumpKey(t, c, ls[i].key)
			}
			// EVAL and PERSIST in one MULTI/EXEC: the server's clock stands
			// still in it, so a key written with 1 ms left cannot expire in
			// real time first. The injected clock decides expiry: the Go
			// steps read a state past its TTL as fresh.
			var ev *redis.Cmd
			_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				ev = p.Eval(ctx, MultiScript().Source, keys, argv...)
				for _, key := range keys {
					p.Persist(ctx, key)
				}
				return nil
			})
			v, err2 := ev.Int64Slice()
			if err == nil {
				err = err2
			}
			if err != nil {
				t.Fatalf("round %d step %d: EVAL: %v", round, step, err)
			}
			if len(v) != 6*k+1 || v[6*k] != now {
				t.Fatalf("reply %v: want %d integers ending in now %d", v, 6*k+1, now)
			}
			all := true
			nexts := make([][]byte, k)
			for i := range ls {
				l := &ls[i]
				next, _, d := l.alg.Step(clone(l.state), now, n, &l.p)
				nexts[i] = next
				want := []int64{0, d.Limit, d.Remaining, int64(d.RetryAfter / time.Microsecond), int64(d.ResetAfter / time.Microsecond), int64(d.Delay / time.Microsecond)}
				if d.Allowed {
					want[0] = 1
				} else {
					all = false
				}
				got := v[6*i : 6*i+6]
				for j := range want {
					if got[j] != want[j] {
						t.Fatalf("round %d step %d limit %d (%s %v) n=%d: script %v, Go step %v", round, step, i, l.alg.Name(), l.p, n, got, want)
					}
				}
			}
			if all {
				for i := range ls {
					if nexts[i] != nil {
						ls[i].state = nexts[i]
					}
				}
			}
			for i := range ls {
				if !all && dumpKey(t, c, ls[i].key) != before[i] {
					t.Fatalf("round %d step %d: a refused decision changed limit %d's key", round, step, i)
				}
			}
		}
	}
}
