package algorithm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
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
func runLua(t *testing.T, c *redis.Client, s *store.Script, key string, a store.ScriptArgs) store.ScriptResult {
	t.Helper()
	v, err := c.Eval(context.Background(), s.Source, []string{key}, luaArgv(s, &a)...).Result()
	if err != nil {
		t.Fatalf("%s: EVAL: %v", s.Name, err)
	}
	return luaReply(t, s, &a, v)
}

// luaArgv is the ARGV of one call of s, as the stores send it: the fields
// s declares, in its order, in decimal.
func luaArgv(s *store.Script, a *store.ScriptArgs) []any {
	var argv []any
	for _, v := range s.AppendArgv(nil, a) {
		argv = append(argv, v)
	}
	return argv
}

// luaReply reads a reply v of s as the stores do: six integers, or one
// that s decodes.
func luaReply(t testing.TB, s *store.Script, a *store.ScriptArgs, v any) store.ScriptResult {
	t.Helper()
	var ints []int64
	switch v := v.(type) {
	case int64:
		ints = []int64{v}
	case []any:
		for i, x := range v {
			n, ok := x.(int64)
			if !ok {
				t.Fatalf("%s: reply[%d] = %#v is not an integer", s.Name, i, x)
			}
			ints = append(ints, n)
		}
	default:
		t.Fatalf("%s: reply %#v is not integers", s.Name, v)
	}
	r, err := s.Result(ints, a)
	if err != nil {
		t.Fatalf("%s: reply %v: %v", s.Name, ints, err)
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
// time and fails at the first decision on which they differ. An option
// turns on the further checks of diffOptions.
func diffLua(t *testing.T, c *redis.Client, alg core.Algorithm, p core.Policy, start time.Time, ops []op, opts ...diffOptions) {
	t.Helper()
	var opt diffOptions
	if len(opts) > 0 {
		opt = opts[0]
	}
	diffLuaWith(t, c, alg, p, start, ops, opt)
}

// diffOptions are opt-in checks for diffLuaWith. The zero value is diffLua.
type diffOptions struct {
	// injectedExpiry puts the key's lifetime on the injected clock. The
	// server expires keys by its own clock, which knows nothing of the
	// injected one, so a ttl of a few µs could otherwise drop the key
	// between two calls at the same injected instant. With it, after every
	// call the key's PTTL is checked and the key is PERSISTed:
	//   - when the Go step wrote (next != nil), PTTL must be ⌈ttl/1ms⌉
	//     (at least 1), less only the real time the call took;
	//   - when it did not (next == nil), the script must not have written
	//     either: the key's value and expiry are unchanged.
	// Once the injected clock reaches the last write's ttl, the key is
	// deleted (as the store's expiry would) on every other call and kept on
	// the others: a state older than its ttl must decide as no state.
	// (Releases are only checked for writing nothing when Go writes
	// nothing: an emptied lease set may vanish.)
	injectedExpiry bool
}

// diffLuaWith is diffLua with the opt-in checks of opt.
func diffLuaWith(t *testing.T, c *redis.Client, alg core.Algorithm, p core.Policy, start time.Time, ops []op, opt diffOptions) {
	t.Helper()
	ctx := context.Background()
	s := alg.(core.Scripted).Script()
	leaser, _ := alg.(core.Leaser)
	key := freshKey(t, c)
	var state []byte
	now := start.UnixMicro()
	var held []uint64
	var nextLease uint64 = 1 << 60 // above 2^53: the id must survive Lua as a string
	var expireAt int64             // injected µs at which the last write's ttl runs out
	expired := 0
	for i, o := range ops {
		now += int64(o.dt / time.Microsecond)
		if now <= 0 {
			now = 1
		}
		if opt.injectedExpiry && state != nil && now >= expireAt {
			if expired++; expired%2 == 1 {
				state = nil
				if err := c.Del(ctx, key).Err(); err != nil {
					t.Fatalf("DEL: %v", err)
				}
			}
		}
		a := core.NewScriptArgs(&p, now, o.n)
		var want core.Decision
		var next []byte
		var ttl time.Duration
		var before string
		if opt.injectedExpiry {
			before = dumpKey(t, c, key)
		}
		began := time.Now()
		switch {
		case leaser != nil && o.release > 0 && len(held) > 0:
			j := (o.release - 1) % len(held)
			id := held[j]
			held = append(held[:j], held[j+1:]...)
			next, ttl = leaser.Release(clone(state), now, id, &p)
			a.N, a.Lease, a.Op = 1, id, store.OpRelease
			if opt.injectedExpiry {
				_, pttl := runLuaHeld(t, c, s, key, a)
				checkExpiry(t, c, key, i, before, began, pttl, next != nil, ttl, true)
			} else {
				runLua(t, c, s, key, a)
			}
			if next != nil {
				state, expireAt = next, now+int64(ttl/time.Microsecond)
			}
			continue
		case leaser != nil:
			nextLease += 12345
			next, ttl, want = leaser.Acquire(clone(state), now, nextLease, &p)
			a.N, a.Lease = 1, nextLease
			if want.Allowed {
				held = append(held, nextLease)
			}
		default:
			next, ttl, want = alg.Step(clone(state), now, o.n, &p)
		}
		if next != nil {
			state, expireAt = next, now+int64(ttl/time.Microsecond)
		}
		var r store.ScriptResult
		var pttl int64
		if opt.injectedExpiry {
			r, pttl = runLuaHeld(t, c, s, key, a)
		} else {
			r = runLua(t, c, s, key, a)
		}
		if got := core.ScriptDecision(r); got != want {
			t.Fatalf("%s %v: call %d (now=%d, n=%d, dt=%v):\n Lua %+v\n Go  %+v", alg.Name(), p, i, now, a.N, o.dt, got, want)
		}
		if opt.injectedExpiry {
			checkExpiry(t, c, key, i, before, began, pttl, next != nil, ttl, false)
		}
	}
}

// dumpKey is the key's serialized value, or "" when it is absent.
func dumpKey(t *testing.T, c *redis.Client, key string) string {
	t.Helper()
	v, err := c.Dump(context.Background(), key).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("DUMP: %v", err)
	}
	return v
}

// runLuaHeld is runLua followed, in the same MULTI/EXEC, by PTTL and
// PERSIST of the key: it returns the reply and the PTTL (ms) the script
// left. The server's clock stands still during a transaction, so a key the
// script wrote with a 1 ms expiry cannot expire in real time before it is
// PERSISTed, as it could between separate round trips.
func runLuaHeld(t *testing.T, c *redis.Client, s *store.Script, key string, a store.ScriptArgs) (store.ScriptResult, int64) {
	t.Helper()
	ctx := context.Background()
	argv := luaArgv(s, &a)
	var eval *redis.Cmd
	var pttl *redis.Cmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		eval = p.Eval(ctx, s.Source, []string{key}, argv...)
		pttl = p.Do(ctx, "PTTL", key)
		p.Persist(ctx, key)
		return nil
	})
	if err != nil {
		t.Fatalf("%s: EVAL, PTTL, PERSIST: %v", s.Name, err)
	}
	v, err := eval.Result()
	if err != nil {
		t.Fatalf("%s: EVAL: %v", s.Name, err)
	}
	ms, err := pttl.Int64()
	if err != nil {
		t.Fatalf("PTTL: %v", err)
	}
	return luaReply(t, s, &a, v), ms
}

// checkExpiry is diffOptions.injectedExpiry's check after call i, which
// began at began and left the key with pttl (from runLuaHeld, which also
// PERSISTed it): see there.
func checkExpiry(t *testing.T, c *redis.Client, key string, i int, before string, began time.Time, pttl int64, wrote bool, ttl time.Duration, release bool) {
	t.Helper()
	took := time.Since(began).Milliseconds()
	switch {
	case !wrote:
		if after := dumpKey(t, c, key); after != before || pttl >= 0 {
			t.Fatalf("call %d: the Go step wrote nothing, but the script changed the key (PTTL %d ms)", i, pttl)
		}
	case !release:
		want := max(1, (int64(ttl/time.Microsecond)+999)/1000)
		// The server counts down in whole ms from the script's start;
		// take+1 bounds the real time that passed since. A negative PTTL
		// (no expiry, or no key) is wrong however long the call took.
		if pttl > want || pttl < want-took-1 || pttl < 0 {
			t.Fatalf("call %d: PTTL is %d ms, want %d ms (ttl %v; the call took %d ms)", i, pttl, want, ttl, took)
		}
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
