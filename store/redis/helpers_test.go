package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the deadline tests fail many on
	// purpose.
	goredis.SetLogger(quietLogger{})
	os.Exit(m.Run())
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// userClient is a client as a user would build it: go-redis defaults
// (MaxRetries 3, no ContextTimeoutEnabled).
func userClient(t testing.TB) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s: %v", c.Options().Addr, err)
	}
	return c
}

// userCluster is a cluster client with go-redis defaults.
func userCluster(t testing.TB) *goredis.ClusterClient {
	t.Helper()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testenv.RedisClusterAddrs(t)})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.ForEachShard(context.Background(), func(ctx context.Context, n *goredis.Client) error {
		return n.Ping(ctx).Err()
	}); err != nil {
		t.Fatalf("redis cluster at %v: %v", c.Options().Addrs, err)
	}
	return c
}

// userFailover is a failover client for the Sentinel's master, with
// go-redis defaults.
func userFailover(t testing.TB, master string) *goredis.Client {
	t.Helper()
	c := goredis.NewFailoverClient(&goredis.FailoverOptions{
		MasterName:    master,
		SentinelAddrs: []string{testenv.RedisSentinelAddr(t)},
	})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the primary of sentinel %s: %v", testenv.RedisSentinelAddr(t), err)
	}
	return c
}

// newStore returns a store over a fresh user client, closed at cleanup.
func newStore(t testing.TB, opts *Options) *Store {
	t.Helper()
	s := New(userClient(t), opts)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newClusterStore(t testing.TB, opts *Options) *Store {
	t.Helper()
	s := New(userCluster(t), opts)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var keySeq atomic.Int64

// testKey is a key no other test (or run) uses; it is deleted through admin
// when the test ends.
func testKey(t testing.TB, admin goredis.UniversalClient) store.Key {
	t.Helper()
	k := store.Key{
		Namespace: store.Namespace("sluice-test", "store-redis"),
		Identity:  fmt.Sprintf("%s/%d/%d/%d", t.Name(), time.Now().UnixNano(), keySeq.Add(1), rand.Int64()),
	}
	t.Cleanup(func() { admin.Del(context.Background(), k.String()) })
	return k
}

// ctxT is a context for one store call in a test.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}
