package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// These tests need no server: they check which client the store sends with.

func TestStoreClientFromClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts goredis.Options
		// want: the derived client's normalised options
		readTimeout time.Duration
	}{
		{"defaults", goredis.Options{Addr: "127.0.0.1:1"}, 5 * time.Second},
		{"retries and a timeout", goredis.Options{Addr: "127.0.0.1:1", MaxRetries: 10, ReadTimeout: time.Second}, time.Second},
		{"no timeout", goredis.Options{Addr: "127.0.0.1:1", ReadTimeout: -1}, 0},
		{"no deadlines at all", goredis.Options{Addr: "127.0.0.1:1", ReadTimeout: -2, WriteTimeout: -2}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user := goredis.NewClient(&tc.opts)
			t.Cleanup(func() { _ = user.Close() })
			retries, ctxTimeout := user.Options().MaxRetries, user.Options().ContextTimeoutEnabled
			s := New(user, nil)
			t.Cleanup(func() { _ = s.Close() })
			c, ok := s.Client().(*goredis.Client)
			if !ok || c == user || !s.owned {
				t.Fatalf("the store sends with %T (owned %v), want a *goredis.Client of its own", s.Client(), s.owned)
			}
			o := c.Options()
			if o.MaxRetries != 0 || !o.ContextTimeoutEnabled {
				t.Errorf("MaxRetries %d, ContextTimeoutEnabled %v; want 0 (none) and true", o.MaxRetries, o.ContextTimeoutEnabled)
			}
			if o.ReadTimeout != tc.readTimeout || o.WriteTimeout < 0 {
				t.Errorf("ReadTimeout %v, WriteTimeout %v; want %v and a deadline that the context can set", o.ReadTimeout, o.WriteTimeout, tc.readTimeout)
			}
			if o.Addr != user.Options().Addr || o.PoolSize != user.Options().PoolSize {
				t.Errorf("Addr %q, PoolSize %d: not copied from the user's client", o.Addr, o.PoolSize)
			}
			if u := user.Options(); u.MaxRetries != retries || u.ContextTimeoutEnabled != ctxTimeout {
				t.Errorf("the user's client was changed: MaxRetries %d, ContextTimeoutEnabled %v", u.MaxRetries, u.ContextTimeoutEnabled)
			}
		})
	}
}

func TestStoreClientSafeClientShared(t *testing.T) {
	user := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = user.Close() })
	s := New(user, nil)
	if s.Client() != user || s.owned {
		t.Fatalf("a client that never retries and honours deadlines should be used as it is")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := user.Ping(ctxT(t)).Err(); err == goredis.ErrClosed {
		t.Fatal("Close closed the user's client")
	}
}

func TestStoreClientFromCluster(t *testing.T) {
	user := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: 5, MaxRedirects: 8, ReadOnly: true})
	t.Cleanup(func() { _ = user.Close() })
	s := New(user, nil)
	t.Cleanup(func() { _ = s.Close() })
	c, ok := s.Client().(*goredis.ClusterClient)
	if !ok || c == user || !s.owned || s.cluster != c {
		t.Fatalf("the store sends with %T (owned %v), want a *goredis.ClusterClient of its own", s.Client(), s.owned)
	}
	o := c.Options()
	if o.MaxRetries != -1 || o.MaxRedirects != 0 || !o.ContextTimeoutEnabled || o.ReadOnly {
		t.Errorf("MaxRetries %d, MaxRedirects %d, ContextTimeoutEnabled %v, ReadOnly %v; want -1, 0, true, false",
			o.MaxRetries, o.MaxRedirects, o.ContextTimeoutEnabled, o.ReadOnly)
	}
}

func TestStoreClientSafeClusterShared(t *testing.T) {
	user := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRedirects: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = user.Close() })
	s := New(user, nil)
	if s.Client() != user || s.owned || s.cluster != user {
		t.Fatalf("a cluster client that never retries nor redirects and honours deadlines should be used as it is")
	}
}

func TestStoreClientFromRing(t *testing.T) {
	user := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { _ = user.Close() })
	s := New(user, nil)
	t.Cleanup(func() { _ = s.Close() })
	c, ok := s.Client().(*goredis.Ring)
	if !ok || c == user || !s.owned {
		t.Fatalf("the store sends with %T (owned %v), want a *goredis.Ring of its own", s.Client(), s.owned)
	}
	if o := c.Options(); o.MaxRetries != 0 || !o.ContextTimeoutEnabled {
		t.Errorf("MaxRetries %d, ContextTimeoutEnabled %v; want 0 (none) and true", o.MaxRetries, o.ContextTimeoutEnabled)
	}
}

func TestStoreClientFromFailover(t *testing.T) {
	user := goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = user.Close() })
	s := New(user, nil)
	t.Cleanup(func() { _ = s.Close() })
	c, ok := s.Client().(*goredis.Client)
	if !ok || c == user || !s.owned {
		t.Fatalf("the store sends with %T (owned %v), want a *goredis.Client of its own", s.Client(), s.owned)
	}
	o := c.Options()
	if o.MaxRetries != 0 || !o.ContextTimeoutEnabled {
		t.Errorf("MaxRetries %d, ContextTimeoutEnabled %v; want 0 (none) and true", o.MaxRetries, o.ContextTimeoutEnabled)
	}
	if o.Dialer == nil {
		t.Errorf("the sentinel dialer was not kept")
	}
	// It does not hear the sentinel's switches: its connections must move
	// to a new primary within failoverConnLifetime.
	if o.ConnMaxLifetime <= 0 || o.ConnMaxLifetime > failoverConnLifetime {
		t.Errorf("ConnMaxLifetime %v; want at most %v", o.ConnMaxLifetime, failoverConnLifetime)
	}
}

func TestFailoverOptions(t *testing.T) {
	user := &goredis.FailoverOptions{
		MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, MaxRetries: 5,
		ReadTimeout: -2, WriteTimeout: -2, ReplicaOnly: true, RouteRandomly: true, PoolSize: 7,
	}
	n := failoverOptions(user)
	if n.MaxRetries != -1 || !n.ContextTimeoutEnabled || n.ReadTimeout != -1 || n.WriteTimeout != -1 {
		t.Errorf("retries %d, context timeout %v, read %v, write %v; want -1, true, -1, -1", n.MaxRetries, n.ContextTimeoutEnabled, n.ReadTimeout, n.WriteTimeout)
	}
	if n.ReplicaOnly || n.RouteRandomly || n.RouteByLatency {
		t.Errorf("replica routing kept: the store's reads feed its writes")
	}
	if n.MasterName != "m" || n.PoolSize != 7 || len(n.SentinelAddrs) != 1 {
		t.Errorf("the caller's settings were not kept: %+v", n)
	}
	n.SentinelAddrs[0] = "changed"
	if user.MaxRetries != 5 || user.SentinelAddrs[0] != "127.0.0.1:1" {
		t.Errorf("the caller's options were changed: %+v", user)
	}
	s := NewFailover(user, nil)
	defer s.Close()
	if c, ok := s.Client().(*goredis.Client); !ok || !s.owned || c.Options().MaxRetries != 0 {
		t.Fatalf("NewFailover sends with %T (owned %v)", s.Client(), s.owned)
	}
	nilStore := NewFailover(nil, nil)
	if _, err := nilStore.RunScript(context.Background(), algorithm.GCRA{}.Script(), store.Key{Namespace: "a:b", Identity: "c"}, store.ScriptArgs{}); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("a store over no client: %v, want ErrUnavailable", err)
	}
}

func TestStoreNilClient(t *testing.T) {
	for _, c := range []goredis.UniversalClient{nil, (*goredis.Client)(nil), (*goredis.ClusterClient)(nil), (*goredis.Ring)(nil)} {
		s := New(c, nil)
		if s.Client() != nil {
			t.Errorf("New(%T nil): a client", c)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

// Calls after Close fail, and write nothing, also when the store sends
// through the caller's client, which Close leaves open.
func TestCallsAfterCloseFailOnASharedClient(t *testing.T) {
	user := goredis.NewClient(&goredis.Options{Addr: testenv.RedisAddr(t), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = user.Close() })
	s := New(user, nil)
	if s.Client() != user {
		t.Fatal("the test needs a client the store uses as it is")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var key store.Key
	for _, noScript := range []bool{false, true} {
		l, err := core.New(core.Config{Policy: core.PerSecond("after-close", 5), Algorithm: algorithm.GCRA{}, Store: s, NoScript: noScript})
		if err != nil {
			t.Fatal(err)
		}
		key = l.Key(t.Name())
		t.Cleanup(func() { user.Del(context.Background(), key.String()) })
		if d, err := l.Allow(ctxT(t), t.Name()); !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrOutcomeUnknown) {
			t.Errorf("NoScript %v: Allow after Close: %+v %v; want an error matching ErrUnavailable, not an unknown outcome", noScript, d, err)
		}
	}
	if err := s.Delete(ctxT(t), key); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Delete after Close: %v, want an error matching ErrUnavailable", err)
	}
	if n, err := user.Exists(ctxT(t), key.String()).Result(); err != nil || n != 0 {
		t.Errorf("a key was written after Close (%d, %v)", n, err)
	}
}

// NewFailover's connections are recycled within failoverConnLifetime too:
// the announcement's hook closes the pooled connections to the old
// primary, not one still in its handshake with a primary that froze and
// answers when it wakes, after the announcement. Measured from outside
// (a primary SIGSTOPped for 4 s, then SIGCONTed): such connections wrote
// to the old primary for some 10 s, until Sentinel demoted it, and a
// limit of 3,000 admitted up to 4,400.
func TestNewFailoverRecyclesItsConnections(t *testing.T) {
	s := NewFailover(&goredis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, ConnMaxLifetime: time.Hour}, nil)
	t.Cleanup(func() { _ = s.Close() })
	c, ok := s.Client().(*goredis.Client)
	if !ok {
		t.Fatalf("the store sends with %T", s.Client())
	}
	if o := c.Options(); o.ConnMaxLifetime <= 0 || o.ConnMaxLifetime > failoverConnLifetime {
		t.Errorf("ConnMaxLifetime %v; want at most %v", o.ConnMaxLifetime, failoverConnLifetime)
	}
}
