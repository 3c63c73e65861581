package faults

import (
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"
	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/sluicehq/sluice/store"
	smemcache "github.com/sluicehq/sluice/store/memcache"
	sredis "github.com/sluicehq/sluice/store/redis"
	svalkey "github.com/sluicehq/sluice/store/valkey"
)

// storeKind opens one of Sluice's network stores over addrs (one server, or
// the nodes of a cluster), closed when the test ends.
type storeKind struct {
	name string
	open func(t testing.TB, addrs []string, cluster bool) store.Store
}

var storeKinds = []storeKind{
	{"redis", func(t testing.TB, addrs []string, cluster bool) store.Store {
		var c goredis.UniversalClient
		if cluster {
			c = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
		} else {
			c = goredis.NewClient(&goredis.Options{Addr: addrs[0]})
		}
		s := sredis.New(c, nil)
		t.Cleanup(func() { _ = s.Close(); _ = c.Close() })
		return s
	}},
	{"valkey", func(t testing.TB, addrs []string, cluster bool) store.Store {
		s, err := svalkey.Open(valkeygo.ClientOption{InitAddress: addrs, DisableCache: true}, nil)
		if err != nil {
			t.Fatalf("valkey-go over %v: %v", addrs, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"memcache", func(t testing.TB, addrs []string, _ bool) store.Store {
		c := gomemcache.New(addrs...)
		// A round trip abandoned at its deadline keeps its goroutine until
		// the client's own Timeout: short, so that goroutines are back at
		// baseline soon after a stall.
		c.Timeout = 300 * time.Millisecond
		c.MaxIdleConns = 64
		s := smemcache.New(c, nil)
		t.Cleanup(func() { _ = s.Close(); _ = c.Close() })
		return s
	}},
}
