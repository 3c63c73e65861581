package redis

import (
	"context"
	"net"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A store must never send a script twice when the first reply was lost, and
// must give up at the caller's deadline. go-redis can do neither for us
// unless it is configured for it:
//
//   - Client and Ring re-send a command up to MaxRetries times (3 by
//     default) after a read timeout, an EOF or a reset connection, which is
//     exactly when the first copy may already have run. Pipelines are
//     re-sent whole on the same errors.
//   - ClusterClient re-sends on the same errors in the loop that follows
//     MOVED and ASK redirects (up to MaxRedirects, 3 by default), and its
//     pipelines re-queue every command of a node whose connection broke,
//     including those whose replies were already read.
//   - Without ContextTimeoutEnabled, a socket read waits for ReadTimeout
//     (5s by default) whatever the context's deadline, and a ReadTimeout of
//     -2 disables read deadlines altogether.
//
// So the store sends through a client of its own, built from a copy of the
// caller's options with every retry turned off (MaxRetries -1, and on a
// cluster MaxRedirects -1: the store follows redirects itself, see
// redirect.go) and the context's deadline honoured. A caller's client that
// is configured that way already is used as it is, sharing its pool.

// storeClient returns the client the store sends with, whether the store
// owns it (and must close it), and the cluster client when it is one. A
// client the store builds calls onConnect after each new connection's own
// OnConnect (the store then checks the server's eviction policy again).
func storeClient(c goredis.UniversalClient, onConnect func()) (goredis.UniversalClient, bool, *goredis.ClusterClient) {
	switch c := c.(type) {
	case *goredis.Client:
		if o := c.Options(); !safeClientOptions(o) {
			n := clientOptions(o)
			n.OnConnect = withOnConnect(n.OnConnect, onConnect)
			return markDials(goredis.NewClient(n)), true, nil
		}
		return c, false, nil
	case *goredis.ClusterClient:
		if o := c.Options(); !safeClusterOptions(o) {
			n := clusterOptions(o)
			n.OnConnect = withOnConnect(n.OnConnect, onConnect)
			cc := goredis.NewClusterClient(n)
			cc.OnNewNode(func(c *goredis.Client) { markDials(c) })
			return cc, true, cc
		}
		return c, false, c
	case *goredis.Ring:
		if o := c.Options(); !safeRingOptions(o) {
			n := ringOptions(o)
			n.OnConnect = withOnConnect(n.OnConnect, onConnect)
			r := goredis.NewRing(n)
			r.OnNewNode(func(c *goredis.Client) { markDials(c) })
			return r, true, nil
		}
		return c, false, nil
	}
	return c, false, nil
}

// markDials makes every error of c's dials a dialError, and returns c. A
// dial runs before any command is written to its connection, and not every
// dial fails with a *net.OpError: a failover client asks its sentinels for
// the primary inside its dial ("all sentinels specified in configuration
// are unreachable", also when they do not know the master's name), and a
// caller's Dialer may fail as it likes. Only a client the store built is
// marked: a caller's client keeps the errors it had.
func markDials(c *goredis.Client) *goredis.Client {
	c.AddHook(dialMark{})
	return c
}

type dialMark struct{}

func (dialMark) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if err != nil {
			return nil, dialError{err}
		}
		return cn, nil
	}
}

func (dialMark) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (dialMark) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// dialError is an error of a dial of a client the store built (markDials):
// its command was never written. It reads as the dial's error.
type dialError struct{ err error }

func (e dialError) Error() string { return e.err.Error() }
func (e dialError) Unwrap() error { return e.err }

// withOnConnect chains hook after a caller's OnConnect.
func withOnConnect(user func(context.Context, *goredis.Conn) error, hook func()) func(context.Context, *goredis.Conn) error {
	if hook == nil {
		return user
	}
	return func(ctx context.Context, cn *goredis.Conn) error {
		if user != nil {
			if err := user(ctx, cn); err != nil {
				return err
			}
		}
		hook()
		return nil
	}
}

// Options() returns options after go-redis normalised them: for Client, a
// MaxRetries of 0 means none (the caller wrote -1), a ReadTimeout of 0 means
// no timeout (the caller wrote -1) and -1 means no deadlines at all (-2).

func safeClientOptions(o *goredis.Options) bool {
	return o.MaxRetries == 0 && o.ContextTimeoutEnabled && o.ReadTimeout >= 0 && o.WriteTimeout >= 0 &&
		o.ClientSideCache == nil && o.ClientSideCacheConfig == nil
}

// clientOptions copies o, normalised, into options that NewClient
// normalises again to the same values, with retries off and the context's
// deadline honoured.
func clientOptions(o *goredis.Options) *goredis.Options {
	n := *o
	if o.MaintNotificationsConfig != nil {
		cfg := *o.MaintNotificationsConfig
		n.MaintNotificationsConfig = &cfg
	}
	n.MaxRetries = -1
	n.ContextTimeoutEnabled = true
	n.ReadTimeout = denormTimeout(o.ReadTimeout)
	n.WriteTimeout = denormTimeout(o.WriteTimeout)
	// The store reads nothing through a cache: its reads feed writes.
	n.ClientSideCache = nil
	n.ClientSideCacheConfig = nil
	// go-redis stores the processor it made in the options it was given;
	// shared, it would route this client's push notifications to the
	// other's handlers (and refuse to register this client's own).
	n.PushNotificationProcessor = nil
	if isFailover(o) && (n.ConnMaxLifetime <= 0 || n.ConnMaxLifetime > failoverConnLifetime) {
		n.ConnMaxLifetime = failoverConnLifetime
	}
	return &n
}

// A failover client (goredis.NewFailoverClient) hears the sentinel's
// +switch-master and then closes its own pool's connections to the old
// primary. A client built from a copy of its options shares its dialer,
// which asks the sentinel, but not that hook: its pooled connections would
// go on writing to the old primary, which accepts writes until Sentinel
// demotes it, seconds later, and then discards them. So such a client's
// connections are recycled after failoverConnLifetime at most, which bounds
// that window; NewFailover builds a failover client that closes it.
const failoverConnLifetime = time.Second

// isFailover reports options that goredis.NewFailoverClient normalised.
func isFailover(o *goredis.Options) bool { return o.Addr == "FailoverClient" }

// failoverOptions copies fo into options for a failover client of the
// store's own: retries off, the context's deadline honoured, and every
// command to the primary.
func failoverOptions(fo *goredis.FailoverOptions) *goredis.FailoverOptions {
	n := *fo
	n.SentinelAddrs = append([]string(nil), fo.SentinelAddrs...)
	n.MaxRetries = -1
	n.ContextTimeoutEnabled = true
	// FailoverOptions are not normalised yet: -2 turns deadlines off.
	if n.ReadTimeout == -2 {
		n.ReadTimeout = -1
	}
	if n.WriteTimeout == -2 {
		n.WriteTimeout = -1
	}
	n.RouteByLatency, n.RouteRandomly, n.ReplicaOnly, n.UseDisconnectedReplicas = false, false, false, false
	n.PushNotificationProcessor = nil
	// The announcement's hook closes the connections to the old primary
	// that are in the pool then, not one dialled to it before and still in
	// its handshake: a primary frozen (SIGSTOP, a stalled VM) takes the
	// TCP connection in the kernel and answers the handshake when it
	// wakes, after the announcement, and that connection then wrote to it
	// until Sentinel demoted it, some 10 s later. Recycled after
	// failoverConnLifetime, as New's, they stopped about 2 s after its
	// waking.
	if n.ConnMaxLifetime <= 0 || n.ConnMaxLifetime > failoverConnLifetime {
		n.ConnMaxLifetime = failoverConnLifetime
	}
	return &n
}

// denormTimeout turns a normalised Client timeout back into what the caller
// wrote, except that "no deadlines at all" becomes "no timeout": the
// context's deadline must still apply.
func denormTimeout(d time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return -1
}

// ClusterOptions after normalisation: MaxRetries -1 means none (0 or -1
// written), MaxRedirects 0 means none (-1 written), ReadTimeout 0 means none
// (-1 written), -2 is kept and disables deadlines on the nodes.

// (NewClient is always set once normalised: a custom one is assumed to keep
// the options it is given, as go-redis's own does.)
func safeClusterOptions(o *goredis.ClusterOptions) bool {
	return o.MaxRetries == -1 && o.MaxRedirects == 0 && o.ContextTimeoutEnabled &&
		o.ReadTimeout >= 0 && o.WriteTimeout >= 0 &&
		!o.ReadOnly && !o.RouteByLatency && !o.RouteRandomly
}

func clusterOptions(o *goredis.ClusterOptions) *goredis.ClusterOptions {
	n := *o
	if o.MaintNotificationsConfig != nil {
		cfg := *o.MaintNotificationsConfig
		n.MaintNotificationsConfig = &cfg
	}
	n.Addrs = append([]string(nil), o.Addrs...)
	n.MaxRetries = -1
	n.MaxRedirects = -1
	n.ContextTimeoutEnabled = true
	n.ReadTimeout = denormTimeout(o.ReadTimeout)
	n.WriteTimeout = denormTimeout(o.WriteTimeout)
	// Reads of the generic path feed compare-and-set writes: they go to the
	// masters, like the writes.
	n.ReadOnly, n.RouteByLatency, n.RouteRandomly = false, false, false
	n.PushNotificationProcessor = nil
	if user := o.NewClient; user != nil {
		n.NewClient = func(opt *goredis.Options) *goredis.Client {
			opt.MaxRetries, opt.ContextTimeoutEnabled = -1, true
			return user(opt)
		}
	}
	return &n
}

// RingOptions are not normalised at the ring level except MaxRetries (0
// means none, -1 written); timeouts pass to the shards as written, where 0
// means the 5s default and -2 disables deadlines. The shards' own clients
// never retry (go-redis builds them with MaxRetries -1).

func safeRingOptions(o *goredis.RingOptions) bool {
	return o.MaxRetries == 0 && o.ContextTimeoutEnabled && o.ReadTimeout >= -1 && o.WriteTimeout >= -1
}

func ringOptions(o *goredis.RingOptions) *goredis.RingOptions {
	n := *o
	n.Addrs = make(map[string]string, len(o.Addrs))
	for k, v := range o.Addrs {
		n.Addrs[k] = v
	}
	n.MaxRetries = -1
	n.ContextTimeoutEnabled = true
	if o.ReadTimeout < -1 {
		n.ReadTimeout = -1
	}
	if o.WriteTimeout < -1 {
		n.WriteTimeout = -1
	}
	if user := o.NewClient; user != nil {
		n.NewClient = func(opt *goredis.Options) *goredis.Client {
			opt.MaxRetries, opt.ContextTimeoutEnabled = -1, true
			return user(opt)
		}
	}
	return &n
}
