package redis

import (
	"context"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/ctxend"
	"github.com/sluicehq/sluice/store"
)

var (
	_ store.Store        = (*Store)(nil)
	_ store.ScriptRunner = (*Store)(nil)
	_ store.Deleter      = (*Store)(nil)
	_ store.Closer       = (*Store)(nil)
)

// Store keeps Sluice's state in Redis, through go-redis v9: a single node,
// a sentinel-managed primary (a failover client), a Redis Cluster or a Ring.
// Each script decision is one round trip (store.ScriptRunner); algorithms
// without a Lua twin, and Limiters with core.Config.NoScript, use a
// compare-and-set loop (store.Store). See the package doc for the guarantees.
//
// A Store is safe for concurrent use. Share one per client: its batcher
// coalesces the decisions of all goroutines that use it.
type Store struct {
	client  goredis.UniversalClient
	cluster *goredis.ClusterClient // set when client is a cluster client
	owned   bool                   // the store built client and closes it
	opts    Options

	single *batcher // the batcher of a client that is not a cluster
	nodes  sync.Map // cluster: *goredis.Client (a master) → *batcher

	watch *evictWatch // the background checks of the eviction policy

	strayMu sync.Mutex
	strays  map[string]*goredis.Client // cluster nodes outside the slot map (stray)

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool // set by Close: later calls fail, on any client
}

// New returns a Store over c. It never fails: a nil c gives a store whose
// every call returns an error matching core.ErrUnavailable.
//
// When c is a *goredis.Client (including a sentinel failover client), a
// *goredis.ClusterClient or a *goredis.Ring whose options would let go-redis
// re-send a command or outwait a context's deadline, the store sends through
// a client of its own, built from a copy of c's options (see the package
// doc); c is then left for the caller to use and close. Hooks added to c do
// not see the store's commands: add them to Client(). Any other
// UniversalClient is used as it is, and the guarantees then rest on its
// configuration.
func New(c goredis.UniversalClient, opts *Options) *Store {
	s := &Store{opts: opts.withDefaults()}
	if isNil(c) {
		return s
	}
	w := new(evictWatch)
	s.client, s.owned, s.cluster = storeClient(c, w.reconnected)
	s.startBatcher()
	s.watchEviction(w)
	return s
}

// startBatcher gives a store that is not a cluster its batcher, unless
// Options.NoBatch.
func (s *Store) startBatcher() {
	if !s.opts.NoBatch && s.cluster == nil {
		s.single = newBatcher(s, poolSize(s.client))
	}
}

// NewFailover returns a Store over the primary that the sentinels in fo
// watch, through a failover client of its own (goredis.NewFailoverClient)
// built from a copy of fo with retries off, the context's deadline honoured
// and every command sent to the primary (see the package doc). Close closes
// that client. Prefer it to New with a failover client: its client closes
// its connections to the old primary as soon as the sentinel announces a new
// one, where a client New derives from a caller's may write to the old
// primary for up to a second (see the package doc). A nil fo gives a store
// whose every call fails with core.ErrUnavailable.
func NewFailover(fo *goredis.FailoverOptions, opts *Options) *Store {
	s := &Store{opts: opts.withDefaults()}
	if fo == nil {
		return s
	}
	w := new(evictWatch)
	n := failoverOptions(fo)
	n.OnConnect = withOnConnect(n.OnConnect, w.reconnected)
	s.client, s.owned = markDials(goredis.NewFailoverClient(n)), true
	s.startBatcher()
	s.watchEviction(w)
	return s
}

// isNil reports a nil client, also one of the known types in an interface.
func isNil(c goredis.UniversalClient) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *goredis.Client:
		return c == nil
	case *goredis.ClusterClient:
		return c == nil
	case *goredis.Ring:
		return c == nil
	}
	return false
}

// Client returns the client the store sends with: the one given to New, or
// the store's own copy of it (see New).
func (s *Store) Client() goredis.UniversalClient { return s.client }

// Close closes the store's own client, if it built one; a client given to
// New and used as it is stays open. Calls after Close fail with an error
// matching core.ErrUnavailable. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.watch.stop()
		s.closeStrays()
		if s.owned {
			s.closeErr = s.client.Close()
		}
	})
	return s.closeErr
}

// ready reports why the store cannot take a call, or nil: it has no
// client, or it is closed (a client given to New stays open after Close,
// so the store must refuse for it).
func (s *Store) ready(op string) error {
	switch {
	case s.client == nil:
		return &store.Error{Op: op, Err: errNoClient}
	case s.closed.Load():
		return &store.Error{Op: op, Err: errClosed}
	}
	return nil
}

// Delete removes key's state (store.Deleter, for Limiter.Reset). Its
// errors are classified as RunScript's, and it returns at ctx's
// cancellation as RunScript does.
func (s *Store) Delete(ctx context.Context, key store.Key) error {
	if err := s.ready("delete"); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return &store.Error{Op: "delete", Err: err} // nothing was sent
	}
	del := func() (struct{}, error) {
		if err := s.process(ctx, goredis.NewIntCmd(ctx, "del", key.String())); err != nil {
			return struct{}{}, storeError("delete", err)
		}
		return struct{}{}, nil
	}
	if !ctxend.Early(ctx) {
		_, err := del()
		return err
	}
	// go-redis sees only ctx's deadline (see RunScript).
	_, err, ended := ctxend.Run(ctx, del)
	if ended {
		return &store.Error{Op: "delete", Err: store.UnknownOutcome(ctx.Err())}
	}
	return err
}

// batcherFor returns the batcher for key's node, or nil to send directly.
func (s *Store) batcherFor(ctx context.Context, key string) *batcher {
	if s.cluster == nil {
		return s.single
	}
	if s.opts.NoBatch {
		return nil
	}
	node, err := s.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil // sending directly reports the same failure
	}
	if b, ok := s.nodes.Load(node); ok {
		return b.(*batcher)
	}
	b, _ := s.nodes.LoadOrStore(node, newBatcher(s, node.Options().PoolSize))
	return b.(*batcher)
}
