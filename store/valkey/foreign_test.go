package valkey_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	valkeygo "github.com/valkey-io/valkey-go"
)

// TestGenericPathForeignKey: on the generic path (Config.NoScript, and
// every algorithm without a twin, such as Calendar), a key of another type
// than a string under a Limiter's key (a hash, a list... written by other
// software, by hand, or by a Limiter of the same name on the script path)
// reads as absent, as undecodable state does, and the first admission
// replaces it. It used to fail every call with WRONGTYPE, an error that
// matches ErrUnavailable: that identity was refused for ever under
// FailClosed, unlimited under FailOpen, and behind a breaker it opened the
// breaker for every identity.
func TestGenericPathForeignKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, c := newStore(t, b.addrs(t))
		ctx := context.Background()
		algs := append(algorithm.All(), algorithm.Calendar{Period: algorithm.Day})
		for _, alg := range algs {
			for _, kind := range []string{"hash", "list", "set", "zset", "stream"} {
				t.Run(alg.Name()+"/"+kind, func(t *testing.T) {
					p := core.Policy{Name: "foreign-" + randomHex(t), Limit: 3, Window: 24 * time.Hour, LeaseTTL: time.Minute}
					l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s, NoScript: true})
					if err != nil {
						t.Fatal(err)
					}
					key := l.Key("id").String()
					t.Cleanup(func() { c.Do(context.Background(), c.B().Del().Key(key).Build()) })
					plant := map[string][]string{
						"hash":   {"HSET", key, "f", "v"},
						"list":   {"RPUSH", key, "x"},
						"set":    {"SADD", key, "x"},
						"zset":   {"ZADD", key, "1", "x"},
						"stream": {"XADD", key, "*", "f", "v"},
					}[kind]
					if err := c.Do(ctx, c.B().Arbitrary(plant[0]).Keys(plant[1]).Args(plant[2:]...).Build()).Error(); err != nil {
						t.Fatal(err)
					}
					quota, admitted := int(alg.Quota(&p)), 0
					for i := range quota + 1 {
						var d core.Decision
						if _, ok := alg.(core.Leaser); ok {
							_, d, err = l.Acquire(ctx, "id")
						} else {
							d, err = l.Allow(ctx, "id")
						}
						if err != nil {
							t.Fatalf("decision %d over a %s: %v", i, kind, err)
						}
						if d.Allowed {
							admitted++
						}
					}
					if admitted != quota {
						t.Errorf("over a %s: %d of %d admitted, want the quota, %d", kind, admitted, quota+1, quota)
					}
					if typ, _ := c.Do(ctx, c.B().Type().Key(key).Build()).ToString(); typ != "string" {
						t.Errorf("the %s was not replaced: the key is a %s", kind, typ)
					}
				})
			}
		}
	})
}

// plantHash makes the key a hash between the store's read and its swap,
// the first time it is applied; then it appends a byte.
type plantHash struct {
	c       valkeygo.Client
	key     string
	planted bool
}

func (m *plantHash) Apply(state []byte) ([]byte, time.Duration) {
	if !m.planted {
		m.planted = true
		m.c.Do(context.Background(), m.c.B().Del().Key(m.key).Build())
		m.c.Do(context.Background(), m.c.B().Hset().Key(m.key).FieldValue().FieldValue("f", "v").Build())
	}
	return append(state, '!'), time.Minute
}

// TestGenericPathKeyTurnsForeign: a key that becomes of another type
// between Update's read and its swap makes the swap lose, as any other
// write in between does, and the update starts over and replaces it. The
// swap's GET used to fail on it with WRONGTYPE, which was reported as an
// unknown outcome (a store error that counts toward a breaker) though
// nothing was written.
func TestGenericPathKeyTurnsForeign(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s, c := newStore(t, b.addrs(t))
		ctx := context.Background()
		for _, start := range []string{"string", "absent"} {
			t.Run(start, func(t *testing.T) {
				key := freshKey(t, c)
				if start == "string" {
					if err := c.Do(ctx, c.B().Set().Key(key.String()).Value("x").Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
				m := &plantHash{c: c, key: key.String()}
				if err := s.Update(ctx, key, m); err != nil {
					t.Fatalf("Update over a key that turned into a hash: %v", err)
				}
				if typ, _ := c.Do(ctx, c.B().Type().Key(key.String()).Build()).ToString(); typ != "string" {
					t.Errorf("the hash was not replaced: the key is a %s", typ)
				}
			})
		}
	})
}
