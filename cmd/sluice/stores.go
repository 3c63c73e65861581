package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/inspect"
	"github.com/sluicehq/sluice/internal/urlmask"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/storeurl"
)

// dialTimeout bounds how long a store may take to answer its first PING.
const dialTimeout = 2 * time.Second

// firstCallTime is the time a store's first call is given under ctx:
// dialTimeout, or what ctx leaves when that is less (at least 1 ms).
func firstCallTime(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(min(dialTimeout, time.Until(dl)), time.Millisecond)
	}
	return dialTimeout
}

// backend is a store named on the command line. NewStore returns a new,
// independent client of it (each instance of a fleet has its own); the
// returned func closes that client.
type backend struct {
	Name    string
	Scripts bool // a Redis-protocol store: decisions run the Lua twins
	Shared  bool // state is shared across clients (false for memory)
	// Remote says another process opening the same --store reaches the same
	// state: a server, not memory nor the embedded Redis (each process
	// would start its own).
	Remote   bool
	NewStore func() (store.Store, func(), error)
	Close    func()
	inspect  *inspect.Reader // nil: the command cannot look into the backend
}

// openBackend parses a --store value and checks that the store answers
// within dialTimeout. "memory" is the in-process store with its defaults
// (memory:// takes storeurl's parameters); "embedded" starts an in-process
// Redis (miniredis), so the Lua path runs with no server installed.
func openBackend(ctx context.Context, spec string) (*backend, error) {
	switch {
	case spec == "memory":
		s := memory.New(nil)
		return &backend{Name: "memory (in-process)", NewStore: func() (store.Store, func(), error) {
			return s, func() {}, nil
		}, Close: func() { s.Close() }}, nil
	case spec == "embedded":
		m, err := miniredis.Run()
		if err != nil {
			return nil, err
		}
		// Keys expire on the wall clock, as on a Redis (miniredis's
		// default moves TTLs only when a test fast-forwards them).
		m.ClockTTL(true)
		b, err := urlBackend(ctx, "redis://"+m.Addr())
		if err != nil {
			m.Close()
			return nil, err
		}
		closeB := b.Close
		b.Name = "embedded Redis (miniredis " + m.Addr() + ")"
		b.Remote = false
		b.Close = func() { closeB(); m.Close() }
		return b, nil
	}
	// Every message shows the value with its passwords masked.
	shown := urlmask.Mask(spec)
	// A list of hosts with an IPv6 literal is read as storeurl reads it:
	// url.Parse refuses it as a host.
	parsed, list := urlmask.HostList(spec)
	u, err := url.Parse(parsed)
	if err == nil && list != "" {
		u.Host = list
	}
	switch {
	case err != nil && strings.Contains(spec, "://"):
		// Not a URL: storeurl.Open refuses it before any network call,
		// naming what is wrong.
		return urlBackend(ctx, spec)
	case err != nil || u.Scheme == "":
		return nil, usagef("bad --store %q: unknown scheme (none given); known: %s", shown, knownStores)
	case !knownScheme(u.Scheme):
		return nil, usagef("bad --store %q: unknown scheme %q; known: %s", shown, u.Scheme, knownStores)
	case u.Scheme == "memory":
		// storeurl's in-process store, with its parameters (max_keys,
		// shards, sweep_interval): one store for the whole run, as for
		// "memory".
		return urlBackend(ctx, spec)
	case u.Host == "":
		return nil, usagef("bad --store %q: no host:port after %s://", shown, u.Scheme)
	}
	// The command asks for every port: a store named on a command line
	// that falls back to a default port is a typo found late.
	addrs, err := hostList(u.Host)
	if err != nil {
		return nil, usagef("bad --store %q: %v", shown, err)
	}
	// The command's older spellings: memcached://, and redis:// with
	// several hosts for a cluster. The rest of the value goes to
	// storeurl as written.
	written, rest := spec, spec[len(u.Scheme):]
	switch {
	case u.Scheme == "memcached":
		spec = "memcache" + rest
	case (u.Scheme == "redis" || u.Scheme == "rediss") && len(addrs) > 1:
		spec = u.Scheme + "+cluster" + rest
	}
	// valkey-go dials in NewClient, which takes no context: its dial
	// timeout is what bounds an unreachable server.
	if (u.Scheme == "valkey" || u.Scheme == "valkeys") && !u.Query().Has("dial_timeout") {
		spec = addParam(spec, "dial_timeout", firstCallTime(ctx).String())
	}
	b, err := urlBackend(ctx, spec)
	if err != nil && spec != written {
		// The messages show the URL as written.
		err = rewritten{err, urlmask.Mask(spec), urlmask.Mask(written)}
	}
	return b, err
}

// rewritten is err with the URL the command opened shown as the one
// written (from, to: both masked), keeping err's kind (usage, unreachable).
type rewritten struct {
	err      error
	from, to string
}

func (r rewritten) Error() string { return strings.ReplaceAll(r.err.Error(), r.from, r.to) }
func (r rewritten) Unwrap() error { return r.err }

// addParam adds name=value to the query of rawURL, leaving what is there as
// written (a malformed pair included, for storeurl to refuse).
func addParam(rawURL, name, value string) string {
	base, frag, hasFrag := strings.Cut(rawURL, "#")
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	base += sep + url.QueryEscape(name) + "=" + url.QueryEscape(value)
	if hasFrag {
		base += "#" + frag
	}
	return base
}

// knownStores lists every --store form, for messages.
const knownStores = "memory (or memory://?max_keys=...), embedded, redis://host:port[/db], rediss://host:port[/db], " +
	"redis+cluster://h1:p1,h2:p2 (or redis://h1:p1,h2:p2), redis+sentinel://host:port[,host:port...]/master, " +
	"valkey://host:port[,host:port...], memcache://host:port[,host:port...]; " +
	"options as URL parameters (go doc github.com/sluicehq/sluice/storeurl)"

// knownScheme reports whether openBackend opens URLs of scheme.
func knownScheme(scheme string) bool {
	return scheme == "memcached" || slices.Contains(storeurl.Schemes, scheme)
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

// unreachable says how the store named by who failed to answer: past the
// time the command gave it (late, after allowed: dialTimeout, or what was
// left of --timeout), or within a timeout of its own, refused, or with an
// error of its own (a wrong password, a cluster URL to a server that is
// not one).
func unreachable(who string, err error, late bool, allowed time.Duration) error {
	var ne net.Error
	var oe *net.OpError
	switch {
	case late || errors.Is(err, context.DeadlineExceeded):
		return unreachableError{fmt.Errorf("%sdid not answer within %s: %w", who, round(allowed), err)}
	case errors.As(err, &ne) && ne.Timeout():
		return unreachableError{fmt.Errorf("%sdid not answer in time: %w", who, err)}
	case errors.As(err, &oe):
		return unreachableError{fmt.Errorf("%scould not be reached: %w", who, err)}
	}
	return unreachableError{fmt.Errorf("%sanswered with an error: %w", who, err)}
}

// quietLog drops go-redis's own log lines (dial retries, sentinel
// announcements): the command reports a store that does not answer itself,
// once.
type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

// urlBackend opens rawURL with storeurl.Open, the function applications
// use, and checks that the store answers within firstCallTime. Each NewStore
// opens the URL again: a client of its own, as each instance of a fleet
// has (the memory store excepted: it is one process's).
func urlBackend(ctx context.Context, rawURL string) (*backend, error) {
	allowed := firstCallTime(ctx)
	goredis.SetLogger(quietLog{})
	open := func() (*storeurl.Backend, error) {
		b, err := storeurl.Open(rawURL)
		if errors.Is(err, storeurl.ErrBadURL) {
			return nil, usagef("bad --store: %v", err)
		}
		if err != nil {
			// valkey-go connects in Open.
			return nil, unreachable(urlmask.Mask(rawURL)+" ", err, false, allowed)
		}
		return b, nil
	}
	first, err := open()
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, allowed)
	defer cancel()
	if err := first.Ping(pctx); err != nil {
		first.Close()
		return nil, unreachable(first.Name+" ", err, pctx.Err() != nil, allowed)
	}
	b := &backend{Name: first.Name, Shared: first.Scheme != "memory", Close: func() { first.Close() }, inspect: inspectorOf(first.Store)}
	b.Scripts = b.Shared && first.Scheme != "memcache"
	b.Remote = b.Shared
	if !b.Shared {
		b.NewStore = func() (store.Store, func(), error) { return first.Store, func() {}, nil }
		return b, nil
	}
	b.NewStore = func() (store.Store, func(), error) {
		s, err := open()
		if err != nil {
			return nil, nil, err
		}
		return s.Store, func() { s.Close() }, nil
	}
	return b, nil
}
