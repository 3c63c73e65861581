package algorithm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
)

// This file runs each algorithm's Lua twin on a real redis-server with raw
// EVAL and compares it, call by call, with the Go step. The stores' own
// tests repeat the comparison through their clients.

func newRedis(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s: %v", c.Options().Addr, err)
	}
	return c
}

var keySeq atomic.Int64

// freshKey is a key no other test uses; it is deleted when the test ends.
func freshKey(t *testing.T, c *redis.Client) string {
	t.Helper()
	k := fmt.Sprintf("sluice-test:%s:%d:%d:{x}", t.Name(), time.Now().UnixNano(), keySeq.Add(1))
	t.Cleanup(func() { c.Del(context.Background(), k) })
	return k
}

// runLua runs s once with the ScriptArgs convention and returns its reply.
func runLua(t *testing.T, c *redis.Client, s *core.Script, key string, a core.ScriptArgs) core.ScriptResult {
	t.Helper()
	argv := []any{a.Now, a.N, a.Limit, a.Window, a.Burst, a.Interval, a.MaxDelay, a.LeaseTTL,
		strconv.FormatUint(a.Lease, 10), a.Op}
	v, err := c.Eval(context.Background(), s.Source, []string{key}, argv...).Result()
	if err != nil {
		t.Fatalf("%s: EVAL: %v", s.Name, err)
	}
	xs, ok := v.([]any)
	if !ok || len(xs) != 6 {
		t.Fatalf("%s: reply %#v is not six integers", s.Name, v)
	}
	var r core.ScriptResult
	for i, x := range xs {
		n, ok := x.(int64)
		if !ok {
			t.Fatalf("%s: reply[%d] = %#v is not an integer", s.Name, i, x)
		}
		r[i] = n
	}
	return r
}

// op is one call in a differential sequence.
type op struct {
	dt      time.Duration // clock step before the call (may be negative)
	n       int64         // cost (take) — ignored for lease operations
	release int           // for a Leaser: >0 releases the release-th oldest lease still held
}

// randomOps draws count operations with clock steps spread around the
// policy's interval and window, some backwards, and costs up to quota.
func randomOps(r *rand.Rand, p *core.Policy, quota int64, count int) []op {
	w := p.Window
	iv := core.Micros(p.IntervalMicros())
	steps := []time.Duration{0, 1 * time.Microsecond, iv / 2, iv, iv + 1, 2 * iv, w / 3, w / 2, w - 1, w, w + 1, 2 * w, 3 * w, -iv, -w / 4}
	ops := make([]op, count)
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

// diffLua runs ops through the Go step and the Lua twin from the same start
// time and fails at the first decision on which they differ.
func diffLua(t *testing.T, c *redis.Client, alg core.Algorithm, p core.Policy, start time.Time, ops []op) {
	t.Helper()
	s := alg.(core.Scripted).Script()
	leaser, _ := alg.(core.Leaser)
	key := freshKey(t, c)
	var state []byte
	now := start.UnixMicro()
	var held []uint64
	var nextLease uint64 = 1 << 60 // above 2^53: the id must survive Lua as a string
	for i, o := range ops {
		now += int64(o.dt / time.Microsecond)
		if now <= 0 {
			now = 1
		}
		a := core.NewScriptArgs(&p, now, o.n)
		var want core.Decision
		var next []byte
		switch {
		case leaser != nil && o.release > 0 && len(held) > 0:
			j := (o.release - 1) % len(held)
			id := held[j]
			held = append(held[:j], held[j+1:]...)
			next, _ = leaser.Release(clone(state), now, id, &p)
			a.N, a.Lease, a.Op = 1, id, core.OpRelease
			runLua(t, c, s, key, a)
			if next != nil {
				state = next
			}
			continue
		case leaser != nil:
			nextLease += 12345
			next, _, want = leaser.Acquire(clone(state), now, nextLease, &p)
			a.N, a.Lease = 1, nextLease
			if want.Allowed {
				held = append(held, nextLease)
			}
		default:
			next, _, want = alg.Step(clone(state), now, o.n, &p)
		}
		if next != nil {
			state = next
		}
		got := runLua(t, c, s, key, a).Decision()
		if got != want {
			t.Fatalf("%s %v: call %d (now=%d, n=%d, dt=%v):\n Lua %+v\n Go  %+v", alg.Name(), p, i, now, a.N, o.dt, got, want)
		}
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
