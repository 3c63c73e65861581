package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"
	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memcache"
	"github.com/sluicehq/sluice/store/memory"
	sredis "github.com/sluicehq/sluice/store/redis"
	svalkey "github.com/sluicehq/sluice/store/valkey"
)

// dialTimeout bounds how long a store may take to answer its first PING.
const dialTimeout = 2 * time.Second

// backend is a store named on the command line. NewStore returns a new,
// independent client of it (each instance of a fleet has its own); the
// returned func closes that client.
type backend struct {
	Name     string
	Scripts  bool // a Redis-protocol store: decisions run the Lua twins
	Shared   bool // state is shared across clients (false for memory)
	NewStore func() (core.Store, func(), error)
	Close    func()
}

// openBackend parses a --store value and checks that the store answers
// within dialTimeout. "embedded" starts an in-process Redis (miniredis), so
// the Lua path runs with no server installed.
func openBackend(ctx context.Context, spec string) (*backend, error) {
	switch {
	case spec == "memory":
		s := memory.New(nil)
		return &backend{Name: "memory (in-process)", NewStore: func() (core.Store, func(), error) {
			return s, func() {}, nil
		}, Close: func() { s.Close() }}, nil
	case spec == "embedded":
		m, err := miniredis.Run()
		if err != nil {
			return nil, err
		}
		b, err := redisBackend(ctx, []string{m.Addr()}, nil, "embedded Redis (miniredis "+m.Addr()+")")
		if err != nil {
			m.Close()
			return nil, err
		}
		closeB := b.Close
		b.Close = func() { closeB(); m.Close() }
		return b, nil
	}
	u, err := url.Parse(spec)
	switch {
	case err != nil || u.Scheme == "":
		return nil, usagef("bad --store %q: unknown scheme (none given); known: %s", spec, knownStores)
	case !knownScheme(u.Scheme):
		return nil, usagef("bad --store %q: unknown scheme %q; known: %s", spec, u.Scheme, knownStores)
	case u.Host == "":
		return nil, usagef("bad --store %q: no host:port after %s://", spec, u.Scheme)
	}
	addrs, err := hostList(u.Host)
	if err != nil {
		return nil, usagef("bad --store %q: %v", spec, err)
	}
	switch u.Scheme {
	case "redis", "rediss":
		if len(addrs) == 1 {
			opt, err := goredis.ParseURL(spec)
			if err != nil {
				return nil, usagef("bad --store %q: %v", spec, err)
			}
			return redisBackend(ctx, addrs, opt, "redis "+u.Host)
		}
		return redisBackend(ctx, addrs, nil, "redis cluster "+u.Host)
	case "redis+sentinel":
		master := strings.Trim(u.Path, "/")
		if master == "" || strings.Contains(master, "/") {
			return nil, usagef("bad --store %q: want redis+sentinel://host:port[,host:port...]/<master name>", spec)
		}
		return sentinelBackend(ctx, addrs, master)
	case "valkey":
		return valkeyBackend(ctx, addrs)
	case "memcache", "memcached":
		return memcacheBackend(addrs)
	}
	return nil, usagef("bad --store %q: unknown scheme %q; known: %s", spec, u.Scheme, knownStores)
}

// knownStores lists every --store form, for messages.
const knownStores = "memory, embedded, redis://host:port[/db], rediss://host:port[/db], " +
	"redis://h1:p1,h2:p2 (cluster), redis+sentinel://host:port[,host:port...]/master, " +
	"valkey://host:port[,host:port...], memcache://host:port[,host:port...]"

// knownScheme reports whether openBackend opens URLs of scheme.
func knownScheme(scheme string) bool {
	switch scheme {
	case "redis", "rediss", "redis+sentinel", "valkey", "memcache", "memcached":
		return true
	}
	return false
}

// hostList splits "h1:p1,h2:p2" and checks each is host:port.
func hostList(s string) ([]string, error) {
	var out []string
	for _, hp := range splitComma(s) {
		if _, port, err := net.SplitHostPort(hp); err != nil || port == "" {
			return nil, fmt.Errorf("%q is not host:port", hp)
		}
		out = append(out, hp)
	}
	if len(out) == 0 {
		return nil, errors.New("no host")
	}
	return out, nil
}

func splitComma(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// quietLog drops go-redis's own log lines (dial retries): the command
// reports a store that does not answer itself, once.
type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

func redisBackend(ctx context.Context, addrs []string, opt *goredis.Options, name string) (*backend, error) {
	goredis.SetLogger(quietLog{})
	newClient := func() goredis.UniversalClient {
		switch {
		case opt != nil:
			o := *opt
			o.ContextTimeoutEnabled, o.DialTimeout = true, dialTimeout
			return goredis.NewClient(&o)
		case len(addrs) == 1:
			return goredis.NewClient(&goredis.Options{Addr: addrs[0], ContextTimeoutEnabled: true, DialTimeout: dialTimeout})
		}
		return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true, DialTimeout: dialTimeout})
	}
	return goredisBackend(ctx, name, newClient(), func() (core.Store, func()) {
		c := newClient()
		s := sredis.New(c, nil)
		return s, func() { s.Close(); c.Close() }
	})
}

// goredisBackend checks that probe answers PING within dialTimeout (and
// closes it), and returns a backend whose stores newStore builds.
func goredisBackend(ctx context.Context, name string, probe goredis.UniversalClient, newStore func() (core.Store, func())) (*backend, error) {
	defer probe.Close()
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := probe.Ping(pctx).Err(); err != nil {
		return nil, unreachableError{fmt.Errorf("%s did not answer PING within %s: %w", name, dialTimeout, err)}
	}
	return &backend{Name: name, Scripts: true, Shared: true, Close: func() {},
		NewStore: func() (core.Store, func(), error) {
			s, done := newStore()
			return s, done, nil
		}}, nil
}

// sentinelBackend decides on the primary that the sentinels at addrs watch
// as master, through redis.NewFailover: each store has a failover client of
// its own, which follows the sentinels' switches.
func sentinelBackend(ctx context.Context, addrs []string, master string) (*backend, error) {
	goredis.SetLogger(quietLog{})
	opts := func() *goredis.FailoverOptions {
		return &goredis.FailoverOptions{MasterName: master, SentinelAddrs: addrs, DialTimeout: dialTimeout}
	}
	name := "redis sentinel " + strings.Join(addrs, ",") + " master " + master
	return goredisBackend(ctx, name, goredis.NewFailoverClient(opts()), func() (core.Store, func()) {
		s := sredis.NewFailover(opts(), nil)
		return s, func() { s.Close() }
	})
}

func valkeyBackend(ctx context.Context, addrs []string) (*backend, error) {
	newClient := func() (valkeygo.Client, error) {
		return valkeygo.NewClient(valkeygo.ClientOption{InitAddress: addrs, Dialer: net.Dialer{Timeout: dialTimeout}})
	}
	name := "valkey " + strings.Join(addrs, ",")
	probe, err := newClient()
	if err != nil {
		return nil, unreachableError{fmt.Errorf("%s: %w", name, err)}
	}
	defer probe.Close()
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if err := probe.Do(pctx, probe.B().Ping().Build()).Error(); err != nil {
		return nil, unreachableError{fmt.Errorf("%s did not answer PING within %s: %w", name, dialTimeout, err)}
	}
	return &backend{Name: name, Scripts: true, Shared: true, Close: func() {},
		NewStore: func() (core.Store, func(), error) {
			c, err := newClient()
			if err != nil {
				return nil, nil, unreachableError{err}
			}
			s := svalkey.New(c, nil)
			return s, func() { s.Close(); c.Close() }, nil
		}}, nil
}

func memcacheBackend(addrs []string) (*backend, error) {
	newClient := func() *gomemcache.Client {
		c := gomemcache.New(addrs...)
		c.Timeout = dialTimeout
		return c
	}
	name := "memcached " + strings.Join(addrs, ",")
	if err := newClient().Ping(); err != nil {
		return nil, unreachableError{fmt.Errorf("%s did not answer: %w", name, err)}
	}
	return &backend{Name: name, Shared: true, Close: func() {},
		NewStore: func() (core.Store, func(), error) {
			c := newClient()
			s := memcache.New(c, nil)
			return s, func() { s.Close(); c.Close() }, nil
		}}, nil
}
