package redis

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
)

// A cluster client's own redirect loop also re-sends commands after
// timeouts and broken connections, so the store turns it off
// (MaxRedirects -1) and follows MOVED and ASK itself: both replies prove
// that the command did not run, so sending it to the node they name is safe.

// process sends one command, following redirects on a cluster.
func (s *Store) process(ctx context.Context, cmd goredis.Cmder) error {
	err := s.client.Process(ctx, cmd)
	for i := 0; err != nil && i < maxResends; i++ {
		resent, rerr := s.redirect(ctx, cmd, err)
		err = rerr // when not resent: err, or why its redirect was not followed
		if !resent {
			break
		}
	}
	s.reloadAfter(err)
	return err
}

// reloadAfter asks a cluster client to read the slot map again after err,
// a failure that is no reply of a server's (a node that refuses
// connections or does not answer), or a CLUSTERDOWN. go-redis reloads its
// map when it follows a redirect or retries, both of which the store turns
// off: without this, a master killed and replaced by its replica stayed in
// the map, and every call on its slots failed for about a minute after the
// replica had taken over. The reload is go-redis's lazy one (one at a time,
// 200 ms apart); a caller's cancellation asks for none.
func (s *Store) reloadAfter(err error) {
	if s.cluster == nil || err == nil || errors.Is(err, context.Canceled) {
		return
	}
	var reply goredis.Error
	if errors.As(err, &reply) && !goredis.HasErrorPrefix(err, "CLUSTERDOWN") {
		return
	}
	s.cluster.ReloadState(context.Background())
}

// redirect sends cmd again to the node that err, a MOVED or ASK reply,
// names (after ASKING, for ASK). It reports false, with err, when err is no
// redirect or the store is not on a cluster.
func (s *Store) redirect(ctx context.Context, cmd goredis.Cmder, err error) (bool, error) {
	if s.cluster == nil {
		return false, err
	}
	addr, ask := "", false
	if a, ok := goredis.IsMovedError(err); ok {
		addr = a
	} else if a, ok := goredis.IsAskError(err); ok {
		addr, ask = a, true
	} else {
		return false, err
	}
	node, nerr := s.node(ctx, addr)
	if nerr != nil {
		// Still a redirect reply underneath: the command did not run.
		return false, errors.Join(err, nerr)
	}
	if !ask {
		return true, node.Process(ctx, cmd)
	}
	pipe := node.Pipeline()
	_ = pipe.Process(ctx, goredis.NewStatusCmd(ctx, "asking"))
	_ = pipe.Process(ctx, cmd)
	_, _ = pipe.Exec(ctx)
	return true, cmd.Err()
}

// node returns the cluster's client for the node at addr. It reloads the
// cluster's slot map first, so that later commands are routed right too.
// A node the map does not hold, a master just added, which owns no slot
// until the first one moves to it, gets a client of the store's own
// (stray).
func (s *Store) node(ctx context.Context, addr string) (*goredis.Client, error) {
	var found atomic.Pointer[goredis.Client]
	err := s.cluster.ForEachShard(ctx, func(_ context.Context, c *goredis.Client) error {
		if c.Options().Addr == addr {
			found.Store(c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if c := found.Load(); c != nil {
		return c, nil
	}
	return s.stray(addr)
}

// maxStrays bounds the clients stray keeps: a slot moves to a new master a
// few at a time, and the map holds the master once it owns one.
const maxStrays = 16

// stray returns the store's client for a cluster node at addr that the slot
// map does not hold, made with the cluster client's options (its hooks
// aside) and closed with the store.
func (s *Store) stray(addr string) (*goredis.Client, error) {
	s.strayMu.Lock()
	defer s.strayMu.Unlock()
	if c := s.strays[addr]; c != nil {
		return c, nil
	}
	if s.closed.Load() {
		return nil, errClosed
	}
	if len(s.strays) >= maxStrays {
		return nil, fmt.Errorf("sluice/redis: redirected to %s, which is not in the cluster's slot map, beside %d other such nodes", addr, len(s.strays))
	}
	o := s.cluster.Options()
	opt := &goredis.Options{
		Addr:                         addr,
		ClientName:                   o.ClientName,
		Dialer:                       o.Dialer,
		OnConnect:                    o.OnConnect,
		Protocol:                     o.Protocol,
		Username:                     o.Username,
		Password:                     o.Password,
		CredentialsProvider:          o.CredentialsProvider,
		CredentialsProviderContext:   o.CredentialsProviderContext,
		StreamingCredentialsProvider: o.StreamingCredentialsProvider,
		MaxRetries:                   -1, // as the store's own calls: never re-sent
		DialTimeout:                  o.DialTimeout,
		ReadTimeout:                  o.ReadTimeout,
		WriteTimeout:                 o.WriteTimeout,
		ContextTimeoutEnabled:        o.ContextTimeoutEnabled,
		PoolSize:                     o.PoolSize,
		PoolTimeout:                  o.PoolTimeout,
		ConnMaxIdleTime:              o.ConnMaxIdleTime,
		TLSConfig:                    o.TLSConfig,
		DisableIdentity:              o.DisableIdentity,
		IdentitySuffix:               o.IdentitySuffix,
	}
	// As the cluster client's own nodes: 0 here can only be its "none".
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = -1
	}
	if opt.WriteTimeout == 0 {
		opt.WriteTimeout = -1
	}
	var c *goredis.Client
	if o.NewClient != nil {
		c = o.NewClient(opt)
	} else {
		c = goredis.NewClient(opt)
	}
	markDials(c) // a failed dial sent nothing, as on the cluster's own nodes
	if s.strays == nil {
		s.strays = make(map[string]*goredis.Client)
	}
	s.strays[addr] = c
	return c, nil
}

// closeStrays closes the clients stray made.
func (s *Store) closeStrays() {
	s.strayMu.Lock()
	defer s.strayMu.Unlock()
	for _, c := range s.strays {
		_ = c.Close()
	}
	s.strays = nil
}
