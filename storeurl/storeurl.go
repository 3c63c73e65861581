// Package storeurl opens a Sluice store from a URL, so that a deployment
// picks its backend by configuration, not code:
//
//	b, err := storeurl.Open(os.Getenv("SLUICE_STORE")) // "redis://10.0.0.5:6379/0?pool_size=50"
//	if err != nil { ... }                              // a bad URL names what is wrong
//	defer b.Close()
//	limiter, err := core.New(core.Config{Policy: p, Algorithm: algorithm.GCRA{}, Store: b.Store})
//
// # Schemes
//
//	memory://                                    in-process (store/memory)
//	redis://[user:pass@]host:port[/db]           one Redis node (store/redis)
//	rediss://…                                   the same over TLS
//	redis+cluster://[user:pass@]h1:p1,h2:p2,…    a Redis Cluster (any reachable nodes)
//	rediss+cluster://…                           the same over TLS
//	redis+sentinel://[user:pass@]h1:p1,…/master[/db]   the primary a Sentinel watches
//	rediss+sentinel://…                          the same over TLS
//	valkey://[user:pass@]h1:p1[,h2:p2…][/db]      valkey-go (store/valkey): one node, or a cluster
//	valkeys://…                                  the same over TLS
//	memcache://h1:p1[,h2:p2…]                    memcached servers (store/memcache)
//
// A port may be left out of the URL's hosts: 6379 for the Redis schemes,
// 26379 for a Sentinel, 11211 for memcached (not of an addr parameter's,
// which go-redis reads and refuses without one). A host may be an IPv6
// address in brackets, alone or in a list ("[::1]:7000,[::1]:7001"), its
// zone after "%25" (RFC 6874: "[fe80::1%25eth0]:11211"). User
// information in a Sentinel URL authenticates to the sentinels; the primary's own credentials are the
// query parameters username and password. A user or password holding a
// '#', '/' or '?' must %-escape it (%23, %2F, %3F): a URL parser ends the
// user information at the first of them, and Open refuses the URL rather
// than read the rest of the password as a host, a path or a parameter.
//
// A memcache:// URL's servers are resolved (as gomemcache resolves them)
// and sorted before the client gets them: gomemcache sends a key to the
// server at a position in its list, so instances whose URLs list the
// servers in two orders, or spell one server two ways, would count each
// key on two servers. A server listed twice, in any spelling that resolves
// to one address (with and without its default port, [::ffff:127.0.0.1]
// and 127.0.0.1, [::1] with and without a zone, a link-local address's
// interface by its name and by its index), is an error. (Releases before this one kept the URL's order: a
// fleet whose URLs did not list the servers sorted sees most keys start
// fresh once, at the upgrade; roll it out to every instance at once.)
//
// # Query parameters
//
// Every parameter a scheme does not know is an error, and so is a query
// that does not parse (a bad %-escape, a ';' for '&'), a parameter given
// twice (but addr, go-redis's list of more hosts) and a value out of its
// range, so a typo never passes silently. Durations are Go durations
// ("250ms", "2s"). The database number, the URL's path or its db
// parameter (not both), is 0 to 2147483647 (a server's databases setting
// may allow fewer: the first command then fails); protocol is 2 or 3
// (RESP2 or RESP3).
//
// Redis schemes: every option go-redis reads from a URL (its
// redis.ParseURL, ParseClusterURL and ParseFailoverURL: dial_timeout,
// read_timeout, write_timeout, pool_size, min_idle_conns, max_idle_conns,
// pool_timeout, conn_max_idle_time, conn_max_lifetime, client_name,
// protocol, skip_verify for TLS (rediss+cluster too, which go-redis's
// cluster parser does not read), db, …), plus Sluice's own: clock_skew
// (Options.ClockSkew), pipelines and max_batch (the batcher), no_batch=true,
// max_attempts (the compare-and-set loop's bound). go-redis's own retries
// are always off in the store: it never re-sends a decision, and
// max_retries (but -1), min_retry_backoff and max_retry_backoff are
// refused.
// The options the store turns off are refused when set on: read_only,
// route_by_latency, route_randomly, replica_only,
// use_disconnected_replicas and max_redirects (but -1): it reads and
// writes the primaries alone, and follows a cluster's redirects itself.
// dial_timeout must be positive: go-redis reads 0 and less as no timeout,
// and then fails every dial at once.
//
// valkey schemes: dial_timeout (not negative; 0 is valkey-go's default),
// write_timeout (positive; default 1s, where valkey-go's own is 10s: how late a
// reply may be before valkey-go closes its connection, so that a
// connection gone silent while the server lives, as after a lost NAT
// entry, is replaced within about three seconds rather than failing the
// calls on it for 12 s), db, client_name, protocol, skip_verify (valkeys only,
// true or false), plus clock_skew and max_attempts.
//
// memcache: timeout (socket read/write, default 500ms), max_idle_conns
// (per server; default 2, raise it for concurrency), clock_skew,
// max_attempts, no_local_queue=true.
//
// memory: max_keys, shards, sweep_interval.
//
// A parameter with no value ("pool_size=") is an error, whatever its
// scheme: the client libraries read most as unset. Counts and sizes have
// maxima, past which a value is an error, so that a
// typo cannot make a client allocate without end (go-redis makes its pool
// with the client): pool_size, min_idle_conns, max_idle_conns,
// max_active_conns and max_concurrent_dials take 0 to 10000,
// pipeline_pool_size -1 (no pipeline pool) to 10000,
// pipeline_read_buffer_size and pipeline_write_buffer_size 0 to 16777216
// (16 MiB); pipelines and max_batch 1 to 10000; memcache's max_idle_conns
// 1 to 10000; memory's shards 1 to 65536. max_keys and max_attempts have
// none: the memory store's memory follows its live keys, not max_keys. A
// host name (in the URL's hosts and in addr parameters) is at most 253
// bytes, as DNS allows, and a Sentinel master name at most 256: each goes
// into the store's Name and its client's messages.
//
// Open makes no network call, except for valkey: go-redis and gomemcache
// connect on first use (but go-redis dials min_idle_conns connections in
// the background as soon as its client is made, and redials them when they
// fail), while valkey-go connects when its client is made, so
// an unreachable valkey fails Open with an error matching
// core.ErrUnavailable (never ErrBadURL), as does a memcached host that does
// not resolve; a valkey URL Open cannot open is refused before it
// connects. Use Backend.Ping to check that a store answers, within its
// context on every scheme.
package storeurl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"
	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/abbrev"
	"github.com/sluicehq/sluice/internal/urlmask"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcache"
	"github.com/sluicehq/sluice/store/memory"
	sredis "github.com/sluicehq/sluice/store/redis"
	svalkey "github.com/sluicehq/sluice/store/valkey"
)

// Schemes lists every scheme Open knows, in the order of the package doc.
var Schemes = []string{
	"memory", "redis", "rediss", "redis+cluster", "rediss+cluster",
	"redis+sentinel", "rediss+sentinel", "valkey", "valkeys", "memcache",
}

// ErrBadURL matches every error Open returns for a URL it cannot open.
var ErrBadURL = errors.New("storeurl: bad store URL")

// URLError is a URL Open cannot open: what is wrong, and the URL with any
// password masked.
type URLError struct {
	URL    string // redacted
	Reason string
}

func (e *URLError) Error() string {
	// A URL, and a reason quoting part of it, are cut short: a megabyte of
	// either would drown what is wrong.
	return "storeurl: " + abbrev.Quote(e.URL, 256) + ": " + abbrev.Cut(e.Reason, 512)
}

// Is makes errors.Is(err, ErrBadURL) true.
func (e *URLError) Is(target error) bool { return target == ErrBadURL }

// cutError is err with its message cut to 512 bytes: an error that quotes
// a host of the URL (a resolver's does) is as long as the host.
func cutError(err error) error { return &shortError{msg: abbrev.Cut(err.Error(), 512), err: err} }

type shortError struct {
	msg string
	err error
}

func (e *shortError) Error() string { return e.msg }
func (e *shortError) Unwrap() error { return e.err }

// Backend is an opened store and the client it runs on.
type Backend struct {
	// Store is what core.Config.Store takes.
	Store store.Store
	// Scheme is the URL's scheme.
	Scheme string
	// Name describes the backend for logs and messages, without any
	// password: "redis 10.0.0.5:6379", "memcached a:11211,b:11211".
	Name string

	ping      func(context.Context) error
	close     []func() error
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// errClosed is Ping's error after Close.
var errClosed = &store.Error{Op: "ping", Err: errors.New("storeurl: the Backend is closed")}

// Ping checks that the store answers (a PING, memcached's version, or
// nothing for memory), within ctx. After Close it fails, whatever the
// client (gomemcache's stays usable after its Close).
func (b *Backend) Ping(ctx context.Context) error {
	if b.closed.Load() {
		return errClosed
	}
	if b.ping == nil {
		return nil
	}
	return b.ping(ctx)
}

// Close closes the store and then the client Open made for it. It is safe
// to call more than once, also from several goroutines at once: the first
// call closes, and every call returns once that is done, with its error.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		var errs []error
		for _, c := range b.close {
			errs = append(errs, c())
		}
		b.close = nil
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// Open parses rawURL and returns the store it names, on a client of its own:
// each call is one more instance's connections. Errors for the URL match
// ErrBadURL (a *URLError) and name what is wrong: an unknown scheme (with
// the known ones), a missing host, a bad port, an unknown or malformed
// parameter; no password appears in them.
func Open(rawURL string) (*Backend, error) {
	masked := urlmask.Mask(rawURL)
	parsed, list := urlmask.HostList(rawURL)
	u, err := url.Parse(parsed)
	if err == nil && list != "" {
		u.Host = list
	}
	if err != nil {
		if !strings.Contains(rawURL, "://") {
			return nil, &URLError{URL: masked, Reason: "no scheme: want <scheme>://host:port; known: " + strings.Join(Schemes, ", ")}
		}
		return nil, &URLError{URL: masked, Reason: urlmask.Scrub("not a URL: "+parseReason(rawURL, err), rawURL)}
	}
	// A reason may quote a part of the URL (a path, a parameter's name)
	// that holds a password or a piece of one: it is cleared of them.
	bad := func(format string, args ...any) error {
		return &URLError{URL: masked, Reason: urlmask.Scrub(fmt.Sprintf(format, args...), rawURL)}
	}
	if list != "" {
		hs := strings.Split(list, ",")
		for i, hp := range hs {
			if err := hostName(hp); err != nil {
				return nil, bad("%s", err)
			}
			if strings.HasPrefix(hp, "[") && strings.Contains(hp, "%") {
				// An address's zone is escaped in a URL ("%25" for '%',
				// RFC 6874): read as url.Parse reads a URL's one host.
				h, err := url.Parse("//" + hp)
				if err != nil {
					return nil, bad("bad host %q: %s", hp, errors.Unwrap(err))
				}
				hs[i] = h.Host
			}
		}
		u.Host = strings.Join(hs, ",")
	}
	if misreadUserinfo(rawURL) {
		// url.Parse read part of the password as a host, a path, a query
		// or a fragment: whatever it reads next is not what was meant.
		return nil, bad("%s", escapeHint)
	}
	if u.Scheme == "" {
		return nil, bad("no scheme; known: %s", strings.Join(Schemes, ", "))
	}
	if !slices.Contains(Schemes, u.Scheme) {
		return nil, bad("unknown scheme %q; known: %s", u.Scheme, strings.Join(Schemes, ", "))
	}
	if u.Opaque != "" {
		return nil, bad("want %s://host…, not %s:…", u.Scheme, u.Scheme)
	}
	if u.Fragment != "" {
		return nil, bad("a store URL has no #fragment")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		// u.Query drops what does not parse, and an option dropped is a
		// setting the deployment believes it made.
		return nil, bad("malformed query: %s", err)
	}
	// The client libraries keep one of a parameter given twice, which
	// leaves the other a setting the deployment believes it made. addr is
	// go-redis's list of more hosts.
	for _, a := range q["addr"] {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			host = a
		}
		if err := nameLength(host); err != nil {
			return nil, bad("parameter addr: %s", err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if n := len(q[name]); n > 1 && name != "addr" {
			return nil, bad("parameter %s is given %d times", name, n)
		}
		// go-redis reads most empty values as unset: a typo, or a value
		// lost on its way into the URL, would pass silently.
		if slices.Contains(q[name], "") {
			return nil, bad("parameter %s has no value", name)
		}
	}
	var b *Backend
	switch u.Scheme {
	case "memory":
		b, err = openMemory(u, q)
	case "redis", "rediss":
		b, err = openRedis(u, q)
	case "redis+cluster", "rediss+cluster":
		b, err = openRedisCluster(u, q)
	case "redis+sentinel", "rediss+sentinel":
		b, err = openSentinel(u, q)
	case "valkey", "valkeys":
		b, err = openValkey(u, q)
	case "memcache":
		b, err = openMemcache(u, q)
	}
	if err != nil {
		var ue *URLError
		if errors.As(err, &ue) || errors.Is(err, core.ErrUnavailable) {
			return nil, err
		}
		return nil, bad("%s", errReason(err))
	}
	b.Scheme = u.Scheme
	return b, nil
}

// errReason is err's text without a "redis: " or "parse …: " lead-in.
func errReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// escapeHint is what a URL whose user information holds a '#', '/' or '?'
// needs, since url.Parse ends the user information at the first of them.
const escapeHint = "a '#', '/' or '?' in a user or password must be %-escaped (%23, %2F, %3F)"

// parseReason is why url.Parse refused rawURL, without what it quotes of a
// password (it quotes a bad port or %-escape, which may be the password's:
// "redis://:pw#x@host" reads as the host ":pw"), and with escapeHint when
// the password holds a '#', '/' or '?'.
func parseReason(rawURL string, err error) string {
	reason := errReason(err)
	i, j, ok := urlmask.Bounds(rawURL)
	if !ok || !strings.Contains(rawURL[i:j], ":") {
		return reason
	}
	userinfo := rawURL[i:j]
	var b strings.Builder
	for rest := reason; rest != ""; {
		k := strings.IndexByte(rest, '"')
		if k < 0 {
			b.WriteString(rest)
			break
		}
		lit, err := strconv.QuotedPrefix(rest[k:])
		if err != nil {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:k])
		if s, _ := strconv.Unquote(lit); s == "" || !strings.Contains(userinfo, s) {
			b.WriteString(lit)
		}
		rest = rest[k+len(lit):]
	}
	reason = strings.Join(strings.Fields(b.String()), " ")
	if strings.ContainsAny(userinfo, "#/?") {
		reason += "; " + escapeHint
	}
	return reason
}

// misreadUserinfo reports whether url.Parse, which ends the user
// information at the first '/', '?' or '#', ends it before the '@' that
// rawURL's writer meant (see urlmask.Userinfo).
func misreadUserinfo(rawURL string) bool {
	i, j, ok := urlmask.Userinfo(rawURL, true)
	if !ok {
		return false
	}
	authority := rawURL[i:]
	if k := strings.IndexAny(authority, "/?#"); k >= 0 {
		authority = authority[:k]
	}
	return i+strings.LastIndexByte(authority, '@') != j
}

// params reads and removes Sluice's own parameters from q, so that what is
// left can go to the client library's parser, which refuses unknown ones.
type params struct {
	q   url.Values
	err error
}

func (p *params) take(name string) (string, bool) {
	vs, ok := p.q[name]
	if !ok {
		return "", false
	}
	delete(p.q, name)
	if len(vs) != 1 {
		p.fail(fmt.Errorf("parameter %s is given %d times", name, len(vs)))
	}
	return vs[len(vs)-1], true
}

func (p *params) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

func (p *params) duration(name string) time.Duration {
	v, ok := p.take(name)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		p.fail(fmt.Errorf("parameter %s=%q is not a duration (like 250ms or 2s)", name, v))
	}
	return d
}

// int reads a whole number from min to max (math.MaxInt: no maximum).
func (p *params) int(name string, min, max int) int {
	v, ok := p.take(name)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		p.fail(intError(name, v, min, max))
	}
	return n
}

func intError(name, v string, min, max int) error {
	if max == math.MaxInt {
		return fmt.Errorf("parameter %s=%q is not a whole number of at least %d", name, v, min)
	}
	return fmt.Errorf("parameter %s=%q is not a whole number from %d to %d", name, v, min, max)
}

func (p *params) bool(name string) bool {
	v, ok := p.take(name)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(fmt.Errorf("parameter %s=%q is not true or false", name, v))
	}
	return b
}

// done reports the first malformed parameter, or else the first one left
// that nobody took.
func (p *params) done() error {
	if p.err != nil {
		return p.err
	}
	if len(p.q) > 0 {
		names := slices.Sorted(maps.Keys(p.q))
		return fmt.Errorf("unknown parameter %s", names[0])
	}
	return nil
}

// maxHostName is the longest host name DNS allows, and maxMasterName the
// longest Sentinel master name Open takes: either goes into the store's
// Name and into its client's messages.
const (
	maxHostName   = 253
	maxMasterName = 256
)

// hosts splits u.Host ("h1:p1,h2:p2") into host:port addresses, giving
// each the default port when it has none.
func hosts(u *url.URL, defaultPort string) ([]string, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("no host: want %s://host:port", u.Scheme)
	}
	var out []string
	for _, hp := range strings.Split(u.Host, ",") {
		if hp == "" {
			return nil, fmt.Errorf("an empty host in %q", u.Host)
		}
		if strings.HasPrefix(hp, "[") && !strings.Contains(hp, "]") {
			return nil, fmt.Errorf("bad IPv6 address in %q: no closing ]", hp)
		}
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			// No port (or an IPv6 literal in brackets without one).
			host, port = strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]"), defaultPort
		}
		if host == "" {
			return nil, fmt.Errorf("no host in %q", hp)
		}
		if err := nameLength(host); err != nil {
			return nil, err
		}
		if ip, _, _ := strings.Cut(host, "%"); strings.HasPrefix(hp, "[") && net.ParseIP(ip) == nil {
			return nil, fmt.Errorf("bad IPv6 address %q in %q", host, hp)
		} else if !strings.HasPrefix(hp, "[") && strings.Contains(host, ":") {
			return nil, fmt.Errorf("bad host %q: an IPv6 address goes in brackets, [::1]:6379", hp)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("bad port %q in %q", port, hp)
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	return out, nil
}

// nameLength refuses a host name longer than DNS allows.
func nameLength(host string) error {
	if len(host) > maxHostName {
		return fmt.Errorf("a host name of %d bytes: a name is at most %d", len(host), maxHostName)
	}
	return nil
}

// hostName checks the name of one host of a list that url.Parse did not
// read (see urlmask.HostList): letters, digits, '.', '-' and '_'. An
// address, in brackets or not (which it refuses), is hosts' to check, as
// for every list.
func hostName(hp string) error {
	if strings.HasPrefix(hp, "[") {
		return nil
	}
	host, _, err := net.SplitHostPort(hp)
	if err != nil {
		host = hp
	}
	if strings.Contains(host, ":") {
		return nil
	}
	for _, c := range []byte(host) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return fmt.Errorf("bad host %q in %q", host, hp)
		}
	}
	return nil
}

func noPath(u *url.URL) error {
	if u.Path != "" && u.Path != "/" {
		return fmt.Errorf("%s takes no path, got %q", u.Scheme, u.Path)
	}
	return nil
}

func openMemory(u *url.URL, q url.Values) (*Backend, error) {
	if u.Host != "" || u.User != nil {
		return nil, errors.New("memory takes no host: want memory:// (with ?max_keys=…)")
	}
	if err := noPath(u); err != nil {
		return nil, err
	}
	p := &params{q: q}
	o := &memory.Options{MaxKeys: p.int("max_keys", 1, math.MaxInt), Shards: p.int("shards", 1, memory.MaxShards), SweepInterval: p.duration("sweep_interval")}
	if err := p.done(); err != nil {
		return nil, err
	}
	s := memory.New(o)
	return &Backend{Store: s, Name: "memory (in-process)", close: []func() error{s.Close}}, nil
}

// redisOptions takes Sluice's own parameters of the Redis schemes.
func redisOptions(p *params) *sredis.Options {
	o := &sredis.Options{
		ClockSkew: p.duration("clock_skew"),
		Pipelines: p.int("pipelines", 1, maxConns),
		MaxBatch:  p.int("max_batch", 1, maxConns),
		NoBatch:   p.bool("no_batch"),
	}
	o.Retry.MaxAttempts = p.int("max_attempts", 1, math.MaxInt)
	return o
}

// goredisURL rebuilds u for go-redis's parsers: scheme redis or rediss,
// the first host, the others as addr parameters, and the query q.
func goredisURL(u *url.URL, addrs []string, q url.Values, path string) string {
	r := url.URL{Scheme: "redis", User: u.User, Host: addrs[0], Path: path}
	if strings.HasPrefix(u.Scheme, "rediss") {
		r.Scheme = "rediss"
	}
	q = cloneValues(q)
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	r.RawQuery = q.Encode()
	return r.String()
}

func cloneValues(q url.Values) url.Values {
	c := url.Values{}
	for k, vs := range q {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

func redisPing(c goredis.UniversalClient) func(context.Context) error {
	return func(ctx context.Context) error { return c.Ping(ctx).Err() }
}

// Maxima of the counts and sizes a URL sets (the package doc lists them):
// past them a value is a typo, and go-redis makes its pool at once, about
// half a KiB for each unit of pool_size and of pipeline_pool_size.
const (
	maxConns  = 10_000   // connections, dials, pipelines in flight, calls a batch
	maxBuffer = 16 << 20 // bytes of a pipeline connection's read or write buffer
)

// goRedisInts are go-redis's parameters that size what its client
// allocates or keeps, with the range Open takes (pipeline_pool_size -1:
// no pipeline pool).
var goRedisInts = []struct {
	name     string
	min, max int
}{
	{"pool_size", 0, maxConns},
	{"min_idle_conns", 0, maxConns},
	{"max_idle_conns", 0, maxConns},
	{"max_active_conns", 0, maxConns},
	{"max_concurrent_dials", 0, maxConns},
	{"pipeline_pool_size", -1, maxConns},
	{"pipeline_read_buffer_size", 0, maxBuffer},
	{"pipeline_write_buffer_size", 0, maxBuffer},
}

// goRedisChecks refuses what go-redis's URL parser takes but its client
// cannot use: a count or size out of its range (a negative pool size
// panics in go-redis, a huge one exhausts memory), a dial timeout that is
// not positive (go-redis reads 0 and less as none, and then every dial
// fails at once), a protocol other than RESP2 or RESP3, a database number
// out of range or given twice.
func goRedisChecks(q url.Values, db string) error {
	for _, c := range goRedisInts {
		if v := q.Get(c.name); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < c.min || n > c.max {
				return intError(c.name, v, c.min, c.max)
			}
		}
	}
	if v := q.Get("dial_timeout"); v != "" {
		// go-redis reads a bare number as seconds.
		d, err := time.ParseDuration(v)
		if n, aerr := strconv.Atoi(v); aerr == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
		if err == nil && d <= 0 {
			return fmt.Errorf("parameter dial_timeout=%q is not positive: every dial would fail at once", v)
		}
	}
	if err := protocolCheck(q); err != nil {
		return err
	}
	if err := clientNameCheck(q); err != nil {
		return err
	}
	if err := turnedOffCheck(q); err != nil {
		return err
	}
	return dbCheck(db, q)
}

// turnedOff are go-redis's switches that store/redis turns off, whatever
// the client says (and max_redirects, but -1, which is "off" as written).
var turnedOff = []string{"read_only", "route_by_latency", "route_randomly", "replica_only", "use_disconnected_replicas"}

// turnedOffCheck refuses such an option set on: it would not hold.
func turnedOffCheck(q url.Values) error {
	const why = "the store turns it off (it reads and writes the primaries alone, and follows a cluster's redirects itself)"
	for _, name := range turnedOff {
		v := q.Get(name)
		if v == "" {
			continue
		}
		on, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("parameter %s=%q is not true or false", name, v)
		}
		if on {
			return fmt.Errorf("parameter %s=%q: %s", name, v, why)
		}
	}
	if v := q.Get("max_redirects"); v != "" && v != "-1" {
		return fmt.Errorf("parameter max_redirects=%q: %s", v, why)
	}
	// go-redis reads max_retries 0 as its default, 3; -1 is "off" as
	// written. The backoffs time retries that never happen.
	for _, name := range []string{"max_retries", "min_retry_backoff", "max_retry_backoff"} {
		if v := q.Get(name); v != "" && (name != "max_retries" || v != "-1") {
			return fmt.Errorf("parameter %s=%q: the store turns go-redis's retries off (it never sends a decision twice)", name, v)
		}
	}
	return nil
}

// skipVerify reads a skip_verify value v, which only the TLS scheme tls
// takes.
func skipVerify(v, scheme, tls string) (bool, error) {
	if scheme != tls {
		return false, fmt.Errorf("parameter skip_verify is for %s:// (TLS) only", tls)
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("parameter skip_verify=%q is not true or false", v)
	}
	return b, nil
}

// clientNameCheck refuses a client_name that Redis and Valkey refuse in
// CLIENT SETNAME (only the characters '!' to '~'): the clients send it in
// every connection's handshake, and every connection would then fail.
func clientNameCheck(q url.Values) error {
	v := q.Get("client_name")
	for i := 0; i < len(v); i++ {
		if v[i] < '!' || v[i] > '~' {
			return fmt.Errorf("parameter client_name=%q may hold only the characters ! to ~ (no space or control character)", v)
		}
	}
	return nil
}

// protocolCheck refuses a protocol other than 2 (RESP2) or 3 (RESP3):
// go-redis and valkey-go read any other as 3.
func protocolCheck(q url.Values) error {
	if v := q.Get("protocol"); v != "" && v != "2" && v != "3" {
		return fmt.Errorf("parameter protocol=%q is not 2 or 3 (RESP2 or RESP3)", v)
	}
	return nil
}

// dbCheck refuses a database number, the URL's path or its db parameter,
// that no Redis has (a server's databases setting, which Open cannot
// know, may allow fewer: the first command then fails), or that is given
// both ways (the client libraries keep the parameter). One that is not a
// number is left to the client library's parser, which refuses it.
func dbCheck(path string, q url.Values) error {
	db := strings.Trim(path, "/")
	if q.Has("db") {
		if db != "" {
			return errors.New("the database number is given twice: as the path and as db")
		}
		db = q.Get("db")
	}
	n, err := strconv.Atoi(db)
	switch {
	case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(db, "-"), err == nil && n > math.MaxInt32:
		return fmt.Errorf("database number %q is past %d", db, math.MaxInt32)
	case errors.Is(err, strconv.ErrRange), err == nil && n < 0:
		return fmt.Errorf("database number %q must not be negative", db)
	}
	return nil
}

func openRedis(u *url.URL, q url.Values) (*Backend, error) {
	addrs, err := hosts(u, "6379")
	if err != nil {
		return nil, err
	}
	if len(addrs) > 1 {
		return nil, fmt.Errorf("%s takes one host; for a cluster use %s+cluster://%s", u.Scheme, u.Scheme, u.Host)
	}
	p := &params{q: q}
	so := redisOptions(p)
	if p.err != nil {
		return nil, p.err
	}
	if err := goRedisChecks(p.q, u.Path); err != nil {
		return nil, err
	}
	opt, err := goredis.ParseURL(goredisURL(u, addrs, p.q, u.Path))
	if err != nil {
		return nil, err
	}
	opt.MaxRetries, opt.ContextTimeoutEnabled = -1, true
	c := goredis.NewClient(opt)
	s := sredis.New(c, so)
	return &Backend{Store: s, Name: "redis " + addrs[0], ping: redisPing(c), close: []func() error{s.Close, c.Close}}, nil
}

func openRedisCluster(u *url.URL, q url.Values) (*Backend, error) {
	addrs, err := hosts(u, "6379")
	if err != nil {
		return nil, err
	}
	if err := noPath(u); err != nil {
		return nil, fmt.Errorf("%w (a cluster has no database number)", err)
	}
	p := &params{q: q}
	so := redisOptions(p)
	if p.err != nil {
		return nil, p.err
	}
	if err := goRedisChecks(p.q, ""); err != nil {
		return nil, err
	}
	// go-redis's cluster URL parser does not read skip_verify, which its
	// single-node one does: read here, as for rediss://.
	var skip bool
	if v, ok := p.take("skip_verify"); ok {
		if skip, err = skipVerify(v, u.Scheme, "rediss+cluster"); err != nil {
			return nil, err
		}
	}
	opt, err := goredis.ParseClusterURL(goredisURL(u, addrs, p.q, ""))
	if err != nil {
		return nil, err
	}
	if skip && opt.TLSConfig != nil {
		opt.TLSConfig.InsecureSkipVerify = true
	}
	opt.MaxRetries, opt.ContextTimeoutEnabled = -1, true
	c := goredis.NewClusterClient(opt)
	s := sredis.New(c, so)
	return &Backend{Store: s, Name: "redis cluster " + strings.Join(addrs, ","), ping: redisPing(c), close: []func() error{s.Close, c.Close}}, nil
}

func openSentinel(u *url.URL, q url.Values) (*Backend, error) {
	addrs, err := hosts(u, "26379")
	if err != nil {
		return nil, err
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if parts[0] == "" || len(parts) > 2 {
		return nil, fmt.Errorf("want %s://host:port[,host:port…]/<master name>[/<db>]", u.Scheme)
	}
	if len(parts[0]) > maxMasterName {
		return nil, fmt.Errorf("a master name of %d bytes: at most %d", len(parts[0]), maxMasterName)
	}
	if _, ok := q["master_name"]; ok {
		return nil, errors.New("the master's name is the URL's path, not a master_name parameter")
	}
	p := &params{q: q}
	so := redisOptions(p)
	if p.err != nil {
		return nil, p.err
	}
	rest := cloneValues(p.q)
	rest.Set("master_name", parts[0])
	path := ""
	if len(parts) == 2 {
		path = "/" + parts[1]
	}
	if err := goRedisChecks(rest, path); err != nil {
		return nil, err
	}
	fo, err := goredis.ParseFailoverURL(goredisURL(u, addrs, rest, path))
	if err != nil {
		return nil, err
	}
	s := sredis.NewFailover(fo, so)
	probe := func(ctx context.Context) error {
		fo := *fo
		fo.ContextTimeoutEnabled = true
		// go-redis retries sentinels that refuse until ctx ends, and says
		// only that ctx ended: one that none of them accepts is said so.
		if err := dialAny(ctx, addrs); err != nil {
			return err
		}
		c := goredis.NewFailoverClient(&fo)
		// go-redis asks the sentinels for the primary within their own
		// dial and read timeouts, not ctx: the probe answers at ctx's end,
		// and its client closes when go-redis gives up.
		done := make(chan error, 1)
		go func() {
			done <- c.Ping(ctx).Err()
			_ = c.Close()
		}()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return &Backend{Store: s, Name: "redis sentinel " + strings.Join(addrs, ",") + " master " + parts[0], ping: probe, close: []func() error{s.Close}}, nil
}

// dialAny connects to each of addrs in turn, within ctx, until one
// accepts (it then hangs up), and otherwise returns the last dial's error.
func dialAny(ctx context.Context, addrs []string) error {
	var err error
	for _, a := range addrs {
		var d net.Dialer
		var c net.Conn
		if c, err = d.DialContext(ctx, "tcp", a); err == nil {
			return c.Close()
		}
	}
	return err
}

// valkeyParams are the parameters valkey-go's ParseURL reads; it ignores
// any other, so Open checks.
// defaultValkeyWriteTimeout is a valkey URL's write_timeout when it sets
// none: ten times the Limiter's default Timeout, so that no reply a
// decision could still use is cut short.
const defaultValkeyWriteTimeout = time.Second

var valkeyParams = []string{"db", "dial_timeout", "write_timeout", "skip_verify", "protocol", "client_name"}

func openValkey(u *url.URL, q url.Values) (*Backend, error) {
	addrs, err := hosts(u, "6379")
	if err != nil {
		return nil, err
	}
	p := &params{q: q}
	so := &svalkey.Options{ClockSkew: p.duration("clock_skew")}
	so.Retry.MaxAttempts = p.int("max_attempts", 1, math.MaxInt)
	if p.err != nil {
		return nil, p.err
	}
	for name := range p.q {
		if !slices.Contains(valkeyParams, name) {
			return nil, fmt.Errorf("unknown parameter %s; %s takes %s, clock_skew, max_attempts", name, u.Scheme, strings.Join(valkeyParams, ", "))
		}
	}
	for _, d := range []string{"dial_timeout", "write_timeout"} {
		if v := p.q.Get(d); v != "" {
			t, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("parameter %s=%q is not a duration (like 250ms or 2s)", d, v)
			}
			if d == "dial_timeout" && t < 0 {
				return nil, fmt.Errorf("parameter dial_timeout=%q must not be negative: every dial would fail at once", v)
			}
			if d == "write_timeout" && t <= 0 {
				return nil, fmt.Errorf("parameter write_timeout=%q must be positive: valkey-go reads 0 as its own default (10s) and a negative one as none, and a connection gone silent would then fail its calls for good", v)
			}
		}
	}
	// valkey-go reads skip_verify only over TLS, an empty one as true, and
	// any protocol but 2 as 3; it would send a bad database number to the
	// server, so that Open failed as if the server were at fault.
	if v, ok := p.q["skip_verify"]; ok {
		if _, err := skipVerify(v[0], u.Scheme, "valkeys"); err != nil {
			return nil, err
		}
	}
	if err := protocolCheck(p.q); err != nil {
		return nil, err
	}
	if err := clientNameCheck(p.q); err != nil {
		return nil, err
	}
	if err := dbCheck(u.Path, p.q); err != nil {
		return nil, err
	}
	path := u.Path
	if strings.Trim(path, "/") == "" {
		path = "" // valkey-go reads "/" as an empty database number
	}
	r := url.URL{Scheme: "redis", User: u.User, Host: addrs[0], Path: path}
	if u.Scheme == "valkeys" {
		r.Scheme = "rediss"
	}
	rest := cloneValues(p.q)
	for _, a := range addrs[1:] {
		rest.Add("addr", a)
	}
	r.RawQuery = rest.Encode()
	opt, err := valkeygo.ParseURL(r.String())
	if err != nil {
		return nil, err
	}
	if opt.TLSConfig != nil && opt.TLSConfig.MinVersion == 0 {
		opt.TLSConfig.MinVersion = tls.VersionTLS12
	}
	if !p.q.Has("write_timeout") {
		opt.ConnWriteTimeout = defaultValkeyWriteTimeout
	}
	if opt.AlwaysRESP2 {
		// valkey-go's client-side cache, which the store does not use,
		// needs RESP3: NewClient refuses RESP2 with it on.
		opt.DisableCache = true
	}
	c, err := valkeygo.NewClient(opt)
	if err != nil {
		// valkey-go connects in NewClient: this is the server, not the URL.
		return nil, &store.Error{Op: "connect to valkey " + strings.Join(addrs, ","), Err: err}
	}
	s := svalkey.New(c, so)
	ping := func(ctx context.Context) error { return c.Do(ctx, c.B().Ping().Build()).Error() }
	closeClient := func() error { c.Close(); return nil }
	return &Backend{Store: s, Name: "valkey " + strings.Join(addrs, ","), ping: ping, close: []func() error{s.Close, closeClient}}, nil
}

// memcacheServers resolves addrs, as gomemcache's ServerList does, and
// returns the addresses they resolve to, sorted. gomemcache sends a key to
// the server at a position in its list (a hash of the key modulo the
// list's length): instances whose URLs list the servers in two orders, or
// spell one server two ways ([::ffff:127.0.0.1] and 127.0.0.1, a port
// with a leading zero, a name in capitals), would send a key to two
// servers, each counting a quota of its own. Resolved and sorted, neither
// matters. A server listed twice would take two places, and is refused.
// A name that does not resolve is the store's error, not the URL's.
func memcacheServers(addrs []string) ([]string, error) {
	out := make([]string, len(addrs))
	from := make(map[string]string, len(addrs))
	for i, a := range addrs {
		ta, err := net.ResolveTCPAddr("tcp", a)
		if err != nil {
			return nil, serversError(addrs, err)
		}
		if !ta.IP.IsLinkLocalUnicast() && !ta.IP.IsLinkLocalMulticast() {
			ta.Zone = "" // dialled alike with any zone, or none
		} else if n, err := strconv.Atoi(ta.Zone); err == nil {
			// An interface by its index is the interface by its name.
			if ifi, err := net.InterfaceByIndex(n); err == nil {
				ta.Zone = ifi.Name
			}
		}
		out[i] = ta.String()
		if first, ok := from[out[i]]; ok {
			if first == a {
				return nil, fmt.Errorf("memcached server %s listed twice", a)
			}
			return nil, fmt.Errorf("memcached servers %s and %s are one server, %s, listed twice", first, a, out[i])
		}
		from[out[i]] = a
	}
	slices.Sort(out)
	return out, nil
}

// serversError is the store's error of memcached servers addrs that
// cannot be resolved: the servers', not the URL's.
func serversError(addrs []string, err error) error {
	return &store.Error{Op: "open", Err: cutError(fmt.Errorf("memcached servers %s: %w", strings.Join(addrs, ","), err))}
}

func openMemcache(u *url.URL, q url.Values) (*Backend, error) {
	addrs, err := hosts(u, "11211")
	if err != nil {
		return nil, err
	}
	if u.User != nil {
		return nil, errors.New("memcache takes no user or password")
	}
	if err := noPath(u); err != nil {
		return nil, err
	}
	p := &params{q: q}
	timeout := p.duration("timeout")
	if timeout < 0 {
		p.fail(fmt.Errorf("parameter timeout=%s must not be negative", timeout))
	}
	idle := p.int("max_idle_conns", 1, maxConns)
	// Servers lets the store read each server's clock for TTLs past 30
	// days (memcached reads those as absolute times on its own clock).
	so := &memcache.Options{ClockSkew: p.duration("clock_skew"), NoLocalQueue: p.bool("no_local_queue"), Servers: addrs}
	so.Retry.MaxAttempts = p.int("max_attempts", 1, math.MaxInt)
	if err := p.done(); err != nil {
		return nil, err
	}
	sorted, err := memcacheServers(addrs)
	if err != nil {
		return nil, err
	}
	// gomemcache.New drops the error of resolving its servers, and its Ping
	// over no server answers nil: a host that does not resolve would read
	// as a store that answers and then fail every call.
	var servers gomemcache.ServerList
	if err := servers.SetServers(sorted...); err != nil {
		return nil, serversError(addrs, err)
	}
	c := gomemcache.NewFromSelector(&servers)
	c.Timeout, c.MaxIdleConns = timeout, idle
	s := memcache.New(c, so)
	ping := func(ctx context.Context) error {
		done := make(chan error, 1)
		go func() { done <- c.Ping() }() // gomemcache takes no context; its Timeout bounds this
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return &Backend{Store: s, Name: "memcached " + strings.Join(addrs, ","), ping: ping, close: []func() error{s.Close, c.Close}}, nil
}
