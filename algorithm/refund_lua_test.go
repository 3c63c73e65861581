package algorithm

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
)

// TestRefundScriptMatchesGo runs random charges (the multi-limit script)
// and refunds of earlier charges (the refund script) on real Redis and
// through the Go steps and Refund methods, and compares every decision and
// every count refunded.
func TestRefundScriptMatchesGo(t *testing.T) {
	c := newRedis(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(13, 2))
	algs := []core.Algorithm{FixedWindow{}, SlidingLog{}, SlidingCounter{}, TokenBucket{}, GCRA{}, LeakyBucket{}, Calendar{Period: Day, Location: mustLoc("America/New_York")}}
	eval := func(src string, key string, args []int64) []int64 {
		t.Helper()
		argv := make([]any, len(args))
		for i, a := range args {
			argv[i] = a
		}
		var ev *redis.Cmd
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			ev = p.Eval(ctx, src, []string{key}, argv...)
			p.Persist(ctx, key)
			return nil
		})
		v, err2 := ev.Int64Slice()
		if err == nil {
			err = err2
		}
		if err != nil {
			t.Fatalf("EVAL: %v", err)
		}
		return v
	}
	gave, none := 0, 0
	t.Cleanup(func() {
		if !t.Failed() && (gave < 20 || none < 20) {
			t.Errorf("the run gave %d refunds and refused %d: it should meet many of both", gave, none)
		}
	})
	for round := 0; round < 120; round++ {
		alg := algs[r.IntN(len(algs))]
		rf := alg.(core.Refunder)
		ms := alg.(core.RefundScripted)
		p := core.Policy{Name: "r", Limit: 1 + r.Int64N(5), Window: time.Duration(1+r.IntN(2)) * time.Second, Burst: r.Int64N(6)}
		if _, ok := alg.(Calendar); ok {
			p.Window = 24 * time.Hour
		}
		key := freshKey(t, c)
		var state []byte
		type receipt struct{ at, mark, n int64 }
		var receipts []receipt
		now := time.Date(2026, 11, 1, 0, 0, 0, 0, mustLoc("America/New_York")).UnixMicro() - int64(r.IntN(3_000_000))
		for step := 0; step < 60; step++ {
			now += []int64{0, 0, 1, 999, 300_000, 1_000_000, 1_700_000}[r.IntN(7)]
			if len(receipts) > 0 && r.IntN(3) == 0 {
				i := r.IntN(len(receipts))
				rc := receipts[i]
				receipts = append(receipts[:i], receipts[i+1:]...)
				k := 1 + r.Int64N(rc.n)
				args := append(ms.AppendMultiArgs([]int64{now, 1, rc.at}, &p, rc.at, k), rc.mark)
				v := eval(RefundScript().Source, key, args)
				next, _, want := rf.Refund(clone(state), now, rc.at, rc.mark, k, &p)
				if next != nil {
					state = next
				}
				if want > 0 {
					gave++
				} else {
					none++
				}
				if len(v) != 1 || v[0] != want {
					t.Fatalf("round %d step %d %s %v: refund of %d charged at %d: script %v, Go %d", round, step, alg.Name(), p, k, rc.at, v, want)
				}
				continue
			}
			n := 1 + r.Int64N(min(alg.Quota(&p), 3))
			args := ms.AppendMultiArgs([]int64{now, 1}, &p, now, n)
			v := eval(MultiScript().Source, key, args)
			next, _, d := alg.Step(clone(state), now, n, &p)
			want := []int64{0, d.Limit, d.Remaining, int64(d.RetryAfter / time.Microsecond), int64(d.ResetAfter / time.Microsecond), int64(d.Delay / time.Microsecond)}
			if d.Allowed {
				want[0] = 1
				state = next
				receipts = append(receipts, receipt{at: now, mark: rf.Mark(d, now, &p), n: n})
			}
			for j := range want {
				if v[j] != want[j] {
					t.Fatalf("round %d step %d %s %v: charge of %d: script %v, Go %v", round, step, alg.Name(), p, n, v[:6], want)
				}
			}
		}
	}
}
