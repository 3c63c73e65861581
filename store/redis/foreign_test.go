package redis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
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
	for name, client := range map[string]func(testing.TB) goredis.UniversalClient{
		"server":  func(t testing.TB) goredis.UniversalClient { return userClient(t) },
		"cluster": func(t testing.TB) goredis.UniversalClient { return userCluster(t) },
	} {
		t.Run(name, func(t *testing.T) {
			c := client(t)
			s := New(c, nil)
			t.Cleanup(func() { _ = s.Close() })
			ctx := context.Background()
			for _, alg := range append(algorithm.All(), algorithm.Calendar{Period: algorithm.Day}) {
				for _, plant := range [][]any{{"hset", "f", "v"}, {"rpush", "x"}, {"sadd", "x"}, {"zadd", 1, "x"}, {"xadd", "*", "f", "v"}} {
					t.Run(fmt.Sprintf("%s/%s", alg.Name(), plant[0]), func(t *testing.T) {
						p := core.Policy{Name: fmt.Sprintf("foreign-%d", time.Now().UnixNano()), Limit: 3, Window: 24 * time.Hour, LeaseTTL: time.Minute}
						l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s, NoScript: true})
						if err != nil {
							t.Fatal(err)
						}
						key := l.Key("id").String()
						t.Cleanup(func() { c.Del(context.Background(), key) })
						if err := c.Do(ctx, append([]any{plant[0], key}, plant[1:]...)...).Err(); err != nil {
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
								t.Fatalf("decision %d over a %s: %v", i, plant[0], err)
							}
							if d.Allowed {
								admitted++
							}
						}
						if admitted != quota {
							t.Errorf("over a %s: %d of %d admitted, want the quota, %d", plant[0], admitted, quota+1, quota)
						}
						if typ := c.Type(ctx, key).Val(); typ != "string" {
							t.Errorf("the %s was not replaced: the key is a %s", plant[0], typ)
						}
					})
				}
			}
		})
	}
}

// Callers racing over one foreign key: one swap replaces it, the others
// find a string and start over; the limit holds exactly.
func TestGenericPathForeignKeyRace(t *testing.T) {
	c := userClient(t)
	s := New(c, nil)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	for round := range 20 {
		p := core.Policy{Name: fmt.Sprintf("foreign-race-%d-%d", time.Now().UnixNano(), round), Limit: 5, Window: time.Hour}
		l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.FixedWindow{}, Store: s, NoScript: true})
		if err != nil {
			t.Fatal(err)
		}
		key := l.Key("id").String()
		t.Cleanup(func() { c.Del(context.Background(), key) })
		if err := c.HSet(ctx, key, "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				d, err := l.Allow(ctx, "id")
				if err != nil {
					t.Errorf("round %d: %v", round, err)
				}
				if d.Allowed {
					admitted.Add(1)
				}
			})
		}
		wg.Wait()
		if n := admitted.Load(); n != 5 {
			t.Fatalf("round %d: %d of 16 racing callers admitted over a hash, want the limit, 5", round, n)
		}
	}
}

// plantHash makes the key a hash between the store's read and its swap,
// the first time it is applied; then it appends a byte.
type plantHash struct {
	c       goredis.UniversalClient
	key     string
	planted bool
}

func (m *plantHash) Apply(state []byte) ([]byte, time.Duration) {
	if !m.planted {
		m.planted = true
		m.c.Del(context.Background(), m.key)
		m.c.HSet(context.Background(), m.key, "f", "v")
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
	for name, client := range map[string]func(testing.TB) goredis.UniversalClient{
		"server":  func(t testing.TB) goredis.UniversalClient { return userClient(t) },
		"cluster": func(t testing.TB) goredis.UniversalClient { return userCluster(t) },
	} {
		for _, start := range []string{"string", "absent"} {
			t.Run(name+"/"+start, func(t *testing.T) {
				c := client(t)
				s := New(c, nil)
				t.Cleanup(func() { _ = s.Close() })
				ctx := context.Background()
				key := store.Key{Namespace: "sluice-test-foreign", Identity: fmt.Sprint(time.Now().UnixNano())}
				t.Cleanup(func() { c.Del(context.Background(), key.String()) })
				if start == "string" {
					if err := c.Set(ctx, key.String(), "x", 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Update(ctx, key, &plantHash{c: c, key: key.String()}); err != nil {
					t.Fatalf("Update over a key that turned into a hash: %v", err)
				}
				if typ := c.Type(ctx, key.String()).Val(); typ != "string" {
					t.Errorf("the hash was not replaced: the key is a %s", typ)
				}
			})
		}
	}
}
