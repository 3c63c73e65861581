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
)

// The fixed window's and the sliding counter's twins keep less than the Go
// step does (the window of the newest admission, not its µs), in a form
// read under the call's Window. The helpers below check what that form
// promises beyond winLuaDiff: the previous form of the state is still read,
// a state written under another Limit decides as in the step, and one
// written under another Window never reads as a long wait.

// winLuaPreviousForm checks that alg's twin reads the state that its
// previous version wrote: over random sequences of calls, before each one
// the key is set to form(state), the Go step's state in the previous form,
// and the twin must decide as the step.
func winLuaPreviousForm(t *testing.T, alg core.Algorithm, policies []core.Policy, form func(t *testing.T, state []byte) string) {
	c := newRedis(t)
	ctx := context.Background()
	s := alg.(core.Scripted).Script()
	for _, p := range policies {
		r := rand.New(rand.NewPCG(uint64(p.Limit), uint64(p.Window)))
		for seq := range 6 {
			key := freshKey(t, c)
			var state []byte
			now := winBase + r.Int64N(1e12)
			for i, o := range randomOps(r, &p, p.Limit, 80) {
				now = max(1, now+int64(o.dt/time.Microsecond))
				prior := "absent"
				if state != nil {
					prior = form(t, state)
					if err := c.Set(ctx, key, prior, 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
				next, _, want := alg.Step(clone(state), now, o.n, &p)
				got := core.ScriptDecision(runLua(t, c, s, key, core.NewScriptArgs(&p, now, o.n)))
				if got != want {
					t.Fatalf("%s %v: sequence %d call %d at %d, n=%d, on %q:\n Lua %+v\n Go  %+v", alg.Name(), p, seq, i, now, o.n, prior, got, want)
				}
				if next != nil {
					state = next
				}
			}
		}
	}
}

// winLuaLimitChange compares alg's twin with its Go step over random
// sequences in which every call has a policy of its own: the given window,
// a limit drawn from limits (as when a policy is reconfigured under its
// name). The key is PERSISTed after each call, so it never expires in real
// time while the injected clock stands; a state whose windows have ended
// must read as fresh by the clock.
func winLuaLimitChange(t *testing.T, alg core.Algorithm, window time.Duration, limits []int64) {
	c := newRedis(t)
	s := alg.(core.Scripted).Script()
	ps := make([]core.Policy, len(limits))
	top := limits[0]
	for i, l := range limits {
		ps[i] = core.Policy{Name: "reconfigured", Limit: l, Window: window}
		if err := ps[i].Validate(); err != nil {
			t.Fatal(err)
		}
		top = max(top, l)
	}
	r := rand.New(rand.NewPCG(uint64(window), uint64(top)))
	for seq := range 8 {
		key := freshKey(t, c)
		var state []byte
		now := winBase + r.Int64N(1e12)
		for i, o := range randomOps(r, &ps[0], top, 120) {
			p := ps[r.IntN(len(ps))]
			now = max(1, now+int64(o.dt/time.Microsecond))
			next, _, want := alg.Step(clone(state), now, o.n, &p)
			res, _ := runLuaHeld(t, c, s, key, core.NewScriptArgs(&p, now, o.n))
			if got := core.ScriptDecision(res); got != want {
				t.Fatalf("%s: sequence %d call %d at %d, n=%d under %v:\n Lua %+v\n Go  %+v", alg.Name(), seq, i, now, o.n, p, got, want)
			}
			if next != nil {
				state = next
			}
		}
	}
}

// winLuaWindowChange writes a state under the first policy of each pair,
// with admissions at random instants, then decides under the second, whose
// Window differs. The twin then reads the state under a window it was not
// written in, and need not decide as the step; but it must answer, and
// never with a wait longer than the first window and twice the second:
// RetryAfter and ResetAfter stay below W1 + 2·W2 for a call no earlier than
// the last admission.
func winLuaWindowChange(t *testing.T, alg core.Algorithm, pairs [][2]core.Policy) {
	c := newRedis(t)
	s := alg.(core.Scripted).Script()
	for _, pair := range pairs {
		a, b := pair[0], pair[1]
		for _, p := range pair {
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
		}
		wa, wb := a.WindowMicros(), b.WindowMicros()
		bound := core.Micros(wa + 2*wb)
		r := rand.New(rand.NewPCG(uint64(wa), uint64(wb)))
		for trial := range 12 {
			key := freshKey(t, c)
			now := winBase + r.Int64N(1e12)
			for range 1 + r.IntN(4) {
				now += r.Int64N(wa)
				runLuaHeld(t, c, s, key, core.NewScriptArgs(&a, now, 1+r.Int64N(a.Limit)))
			}
			for _, dt := range []int64{0, 1, wa / 2, wb / 2, wa, wb} {
				now += dt
				n := 1 + r.Int64N(b.Limit)
				res, _ := runLuaHeld(t, c, s, key, core.NewScriptArgs(&b, now, n))
				d := core.ScriptDecision(res)
				if d.Limit != b.Limit || d.Remaining < 0 || d.Remaining > b.Limit ||
					d.RetryAfter < 0 || d.RetryAfter >= bound || d.ResetAfter < 0 || d.ResetAfter >= bound {
					t.Fatalf("%s: trial %d, written under %v, read under %v at %d, n=%d: %+v; want waits below %v",
						alg.Name(), trial, a, b, now, n, d, bound)
				}
			}
		}
	}
}

// winWindowChanges are the pairs winLuaWindowChange is run on: windows
// doubled, halved, grown and shrunk by orders of magnitude, not dividing
// each other, and the extremes.
func winWindowChanges() [][2]core.Policy {
	pol := func(l int64, w time.Duration) core.Policy {
		return core.Policy{Name: "reconfigured", Limit: l, Window: w}
	}
	return [][2]core.Policy{
		{pol(100, time.Second), pol(100, 2*time.Second)},
		{pol(100, time.Second), pol(100, time.Second/2)},
		{pol(1000, time.Minute), pol(1000, time.Hour)},
		{pol(10, time.Hour), pol(10, time.Minute)},
		{pol(3, 7*time.Millisecond), pol(7, 1001*time.Microsecond)},
		{pol(1, time.Millisecond), pol(core.MaxLimit, core.MaxWindow)},
		{pol(core.MaxLimit, core.MaxWindow), pol(1000, time.Millisecond)},
		{pol(5000, time.Minute), pol(50, time.Second)},
	}
}

// fwPreviousForm is a fixed window state in the form the twin wrote before
// its state became one integer: "<newest admission µs>:<count>".
func fwPreviousForm(t *testing.T, state []byte) string {
	t.Helper()
	last, count, ok := fwDecode(state)
	if !ok {
		t.Fatalf("undecodable fixed window state %x", state)
	}
	return fmt.Sprintf("%d:%d", last, count)
}

func TestFixedWindowLuaPreviousForm(t *testing.T) {
	winLuaPreviousForm(t, FixedWindow{}, winLuaPolicies(core.MaxLimit), fwPreviousForm)
}

func TestFixedWindowLuaLimitChange(t *testing.T) {
	winLuaLimitChange(t, FixedWindow{}, time.Second, []int64{1, 3, 100, 999, 1000, 10_000, 1_000_000})
	winLuaLimitChange(t, FixedWindow{}, time.Millisecond, []int64{1, 2, 1000})
}

func TestFixedWindowLuaWindowChange(t *testing.T) {
	winLuaWindowChange(t, FixedWindow{}, winWindowChanges())
}

// winLuaBench measures one EVALSHA of alg's twin on a real redis-server,
// with a call every dt µs of an injected clock on a key of its own, as
// winBench does for the step: the round trip and the script's own cost. The
// parallel variant gives each goroutine a key and a clock of its own.
func winLuaBench(b *testing.B, alg core.Algorithm, p core.Policy, dt int64) {
	c := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(b), MaxRetries: -1})
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	s := alg.(core.Scripted).Script()
	if err := c.ScriptLoad(ctx, s.Source).Err(); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	run := func(pb func() bool) error {
		key := fmt.Sprintf("sluice-bench:%s:%d:%d:{x}", b.Name(), time.Now().UnixNano(), seq.Add(1))
		defer c.Del(ctx, key)
		now := winBase
		for pb() {
			now += dt
			a := core.NewScriptArgs(&p, now, 1)
			err := c.EvalSha(ctx, s.Hash, []string{key}, luaArgv(s, &a)...).Err()
			if err != nil {
				return err
			}
		}
		return nil
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		if err := run(b.Loop); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			if err := run(pb.Next); err != nil {
				b.Error(err)
			}
		})
	})
}

func BenchmarkFixedWindowLua(b *testing.B) {
	// 100 per second, a call every 3 ms: about a third admitted.
	winLuaBench(b, FixedWindow{}, core.Policy{Name: "fw", Limit: 100, Window: time.Second}, 3000)
}
