package algorithm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// winLuaPolicies are the policies the window algorithms' twins are compared
// under: a tiny window, Limit 1, one unit per µs, limits that do not divide
// the window, windows that are not whole milliseconds, and the largest
// limit and window. Limits above maxLimit are lowered to it.
func winLuaPolicies(maxLimit int64) []core.Policy {
	ps := []core.Policy{
		{Name: "one-per-ms", Limit: 1, Window: time.Millisecond},
		{Name: "one-per-us", Limit: 1000, Window: time.Millisecond},
		{Name: "not-dividing", Limit: 3, Window: 10 * time.Millisecond},
		{Name: "odd-window", Limit: 7, Window: 1001 * time.Microsecond},
		{Name: "per-second", Limit: 100, Window: time.Second},
		{Name: "large", Limit: core.MaxLimit, Window: core.MaxWindow},
		{Name: "large-odd", Limit: 999_999_937, Window: core.MaxWindow - time.Microsecond},
	}
	for i := range ps {
		ps[i].Limit = min(ps[i].Limit, maxLimit)
	}
	return ps
}

// winLuaDiff compares alg's Lua twin with its Go step on a real
// redis-server, over seqs random sequences of count calls per policy, from
// starts near today and on window boundaries, with the key's expiry checked
// and put on the injected clock (diffOptions.injectedExpiry).
func winLuaDiff(t *testing.T, alg core.Algorithm, policies []core.Policy, seqs, count int) {
	c := newRedis(t)
	for _, p := range policies {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			w := p.WindowMicros()
			r := rand.New(rand.NewPCG(uint64(p.Limit), uint64(w)))
			for s := range seqs {
				start := winBase + r.Int64N(1e12)
				switch s % 3 {
				case 1: // the last µs of a window
					start = start - start%w + w - 1
				case 2: // the first µs of a window
					start -= start % w
				}
				ops := randomOps(r, &p, alg.Quota(&p), count)
				t.Run(strconv.Itoa(s), func(t *testing.T) {
					diffLua(t, c, alg, p, time.UnixMicro(start), ops, diffOptions{injectedExpiry: true})
				})
			}
		})
	}
}

// winKeyUsage is what winLuaUsage measures of a key.
type winKeyUsage struct {
	keyLen   int
	usage    int64  // MEMORY USAGE of the key
	floor    int64  // MEMORY USAGE of the same key holding the integer 1
	encoding string // OBJECT ENCODING of the twin's state
	value    string // the state, when it is a string
}

// winKeyLen is the length of a standard key under policy: the default
// prefix, the policy's name and the identity's hash, "sluice:<policy>:{<hash>}".
func winKeyLen(policy string) int {
	return len(core.DefaultPrefix) + len(":") + len(policy) + len(":{") + store.HashLen + len("}")
}

// winLuaMemory runs alg's twin on a standard key (default prefix, policy
// name p.Name, an identity's hash) with steps, at times relative to the
// start of the window holding the real now (each must be admitted), and
// returns MEMORY USAGE of the key, and of the same key holding the integer
// 1: the least any value costs under that key (the key's own string, its
// dictionary entry and the value's object header).
func winLuaMemory(t *testing.T, alg core.Algorithm, p core.Policy, steps ...winStep) (usage, floor int64) {
	t.Helper()
	u := winLuaUsage(t, alg, p, steps...)
	return u.usage, u.floor
}

// winLuaUsage is winLuaMemory, with the key's length and the state's
// encoding and value as well.
func winLuaUsage(t *testing.T, alg core.Algorithm, p core.Policy, steps ...winStep) winKeyUsage {
	t.Helper()
	c := newRedis(t)
	ctx := context.Background()
	key := store.Key{Namespace: store.Namespace(core.DefaultPrefix, p.Name), Identity: t.Name()}.String()
	t.Cleanup(func() { c.Del(ctx, key) })
	if err := c.Set(ctx, key, 1, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	u := winKeyUsage{keyLen: len(key), floor: c.MemoryUsage(ctx, key).Val()}
	c.Del(ctx, key)
	s := alg.(core.Scripted).Script()
	now := time.Now().UnixMicro()
	now -= now % p.WindowMicros()
	for i, st := range steps {
		// Held: the key is PERSISTed in the script's own transaction, so
		// that a 1 ms window's key cannot expire in real time before it is
		// measured (MEMORY USAGE does not count the expiry).
		if r, _ := runLuaHeld(t, c, s, key, core.NewScriptArgs(&p, now+st.at, st.n)); !core.ScriptDecision(r).Allowed {
			t.Fatalf("%s: call %d (n=%d) denied: %+v", alg.Name(), i, st.n, core.ScriptDecision(r))
		}
	}
	var err error
	if u.usage, err = c.MemoryUsage(ctx, key, 0).Result(); err != nil {
		t.Fatalf("MEMORY USAGE: %v", err)
	}
	if u.encoding, err = c.ObjectEncoding(ctx, key).Result(); err != nil {
		t.Fatalf("OBJECT ENCODING: %v", err)
	}
	if c.Type(ctx, key).Val() == "string" {
		u.value = c.Get(ctx, key).Val()
	}
	t.Logf("%s %v: MEMORY USAGE %d bytes for a %d-byte key (%s %q); %d with the value 1",
		alg.Name(), p, u.usage, u.keyLen, u.encoding, u.value, u.floor)
	return u
}

// winLuaForeignKey checks that alg's twin reads a key that holds something
// it did not write (another type, a malformed string) as absent, as the Go
// step reads undecodable state, and replaces it on admission.
func winLuaForeignKey(t *testing.T, alg core.Algorithm, p core.Policy) {
	c := newRedis(t)
	ctx := context.Background()
	s := alg.(core.Scripted).Script()
	l := alg.Quota(&p)
	for name, set := range map[string]func(key string) error{
		"garbage":   func(k string) error { return c.Set(ctx, k, "garbage", 0).Err() },
		"too-long":  func(k string) error { return c.Set(ctx, k, "1:2:3:4:5", 0).Err() },
		"too-large": func(k string) error { return c.Set(ctx, k, "99999999999999999999:5:5", 0).Err() },
		// Numbers that no integer state is, or only one long past:
		// negative, past 2^53 (the fixed window's bound), the largest
		// int64 (past the sliding counter's, 2^53·1000), past 2^64, and
		// decimals in another notation.
		"negative":   func(k string) error { return c.Set(ctx, k, -5, 0).Err() },
		"past-2^53":  func(k string) error { return c.Set(ctx, k, "9007199254740993", 0).Err() },
		"int64-max":  func(k string) error { return c.Set(ctx, k, "9223372036854775807", 0).Err() },
		"past-2^64":  func(k string) error { return c.Set(ctx, k, "99999999999999999999", 0).Err() },
		"float":      func(k string) error { return c.Set(ctx, k, "1.7e15", 0).Err() },
		"signed":     func(k string) error { return c.Set(ctx, k, "+1700000000000000", 0).Err() },
		"whitespace": func(k string) error { return c.Set(ctx, k, "1700000000000000 ", 0).Err() },
		"list":       func(k string) error { return c.RPush(ctx, k, "a").Err() },
		"hash":       func(k string) error { return c.HSet(ctx, k, "a", "1").Err() },
		"zset":       func(k string) error { return c.ZAdd(ctx, k, redis.Z{Score: -5, Member: "x"}).Err() },
	} {
		key := freshKey(t, c)
		if err := set(key); err != nil {
			t.Fatal(err)
		}
		got := core.ScriptDecision(runLua(t, c, s, key, core.NewScriptArgs(&p, winBase, l)))
		_, _, want := alg.Step(nil, winBase, l, &p)
		if got != want {
			t.Fatalf("%s: a %s key decides %+v, want as absent %+v", alg.Name(), name, got, want)
		}
		// Replaced: the next call reads what the twin wrote.
		got = core.ScriptDecision(runLua(t, c, s, key, core.NewScriptArgs(&p, winBase, 1)))
		if got.Allowed {
			t.Fatalf("%s: after a full admission over a %s key, one more unit is admitted: %+v", alg.Name(), name, got)
		}
	}
}

// winLuaServerTime runs alg's twin twice with now = 0, so that it reads the
// server's TIME, and checks that each decision is the Go step's at an
// instant between the server's TIME before and after the call, and that the
// key has an expiry: the script reads TIME in µs.
func winLuaServerTime(t *testing.T, alg core.Algorithm, p core.Policy) {
	c := newRedis(t)
	ctx := context.Background()
	key := freshKey(t, c)
	s := alg.(core.Scripted).Script()
	var state []byte
	for i, n := range []int64{2, 1} {
		t0 := c.Time(ctx).Val().UnixMicro()
		got := core.ScriptDecision(runLua(t, c, s, key, core.NewScriptArgs(&p, 0, n)))
		t1 := c.Time(ctx).Val().UnixMicro()
		at := winDecidedAt(t, c, key, alg, &p, state, n, got, t0, t1)
		if at < 0 {
			t.Fatalf("call %d: the script decided %+v, which the Go step decides at no µs of the server's TIME %d..%d", i, got, t0, t1)
		}
		if pttl := c.PTTL(ctx, key).Val(); pttl <= 0 {
			t.Fatalf("call %d: the key has no expiry (PTTL %v)", i, pttl)
		}
		state, _, _ = alg.Step(clone(state), at, n, &p)
	}
}

// winDecidedAt is the instant in t0..t1 at which the Go step, on state,
// decides n units as got, or -1. A sorted set's newest score (the sliding
// log) is the instant itself, and only it is tried. A string state keeps no
// instant, so every µs is tried: an admission's ResetAfter counts down from
// now to a point the state fixes, so at most one µs matches.
func winDecidedAt(t *testing.T, c *redis.Client, key string, alg core.Algorithm, p *core.Policy, state []byte, n int64, got core.Decision, t0, t1 int64) int64 {
	t.Helper()
	ctx := context.Background()
	from, to := t0, t1
	if c.Type(ctx, key).Val() == "zset" {
		top := c.ZRangeWithScores(ctx, key, -1, -1).Val()
		if len(top) != 1 {
			t.Fatalf("empty sorted set %q", key)
		}
		from = int64(top[0].Score)
		if float64(from) != top[0].Score || from < t0 || from > t1 {
			t.Fatalf("the script recorded %v µs, outside the server's TIME %d..%d", top[0].Score, t0, t1)
		}
		to = from
	}
	for at := from; at <= to; at++ {
		if _, _, want := alg.Step(clone(state), at, n, p); want == got {
			return at
		}
	}
	return -1
}

// winLuaCluster runs alg's twin on a real Redis Cluster, on keys in several
// slots, for short random sequences compared with the Go step: the script
// touches KEYS[1] only, so the cluster runs it wherever the key lives.
// The clock starts on a window boundary and moves by 0 to 2 quarters of a
// window, so every TTL written is at least a quarter window: p.Window must
// be long enough that no key expires in real time during the test.
func winLuaCluster(t *testing.T, alg core.Algorithm, p core.Policy) {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.RedisClusterAddrs(t), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	s := alg.(core.Scripted).Script()
	r := rand.New(rand.NewPCG(3, 5))
	w := p.WindowMicros()
	for k := range 6 {
		key := fmt.Sprintf("sluice-test:%s:%d:{%d}", t.Name(), time.Now().UnixNano(), k)
		t.Cleanup(func() { c.Del(ctx, key) })
		var state []byte
		now := winBase - winBase%w
		for i := range 40 {
			now += r.Int64N(3) * (w / 4)
			n := 1 + r.Int64N(alg.Quota(&p))
			next, _, want := alg.Step(clone(state), now, n, &p)
			if next != nil {
				state = next
			}
			a := core.NewScriptArgs(&p, now, n)
			v, err := c.Eval(ctx, s.Source, []string{key}, luaArgv(s, &a)...).Result()
			if err != nil {
				t.Fatalf("%s on the cluster: EVAL: %v %v", alg.Name(), v, err)
			}
			if got := core.ScriptDecision(luaReply(t, s, &a, v)); got != want {
				t.Fatalf("%s on the cluster, key %d call %d: Lua %+v, Go %+v", alg.Name(), k, i, got, want)
			}
		}
	}
}

func TestFixedWindowLua(t *testing.T) {
	winLuaDiff(t, FixedWindow{}, winLuaPolicies(core.MaxLimit), 12, 150)
}

func TestFixedWindowLuaMemory(t *testing.T) {
	// Every policy, with the window full (the largest count), on a
	// standard key: the state is always one integer.
	for _, p := range winLuaPolicies(core.MaxLimit) {
		for _, name := range []string{"api", "api-v1-users"} {
			p.Name = name
			steps := []winStep{{at: 0, n: 1}}
			if p.Limit > 1 {
				steps = append(steps, winStep{at: 1, n: p.Limit - 1})
			}
			u := winLuaUsage(t, FixedWindow{}, p, steps...)
			if u.keyLen != winKeyLen(name) || u.encoding != "int" || u.usage > 100 {
				t.Errorf("%v: a %d-byte key holds %s %q, MEMORY USAGE %d bytes; want a %d-byte key, int, at most 100",
					p, u.keyLen, u.encoding, u.value, u.usage, winKeyLen(name))
			}
		}
	}
}

func TestFixedWindowLuaServerTime(t *testing.T) {
	winLuaServerTime(t, FixedWindow{}, core.Policy{Name: "fw", Limit: 5, Window: time.Hour})
}

func TestFixedWindowLuaCluster(t *testing.T) {
	winLuaCluster(t, FixedWindow{}, core.Policy{Name: "fw", Limit: 10, Window: time.Hour})
}

func TestFixedWindowLuaForeignKey(t *testing.T) {
	winLuaForeignKey(t, FixedWindow{}, core.Policy{Name: "fw", Limit: 5, Window: time.Second})
}
