package memcache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/store"
)

// Store keeps Sluice's state in memcached through a gomemcache client: one
// server or a pool of several (see the package doc). It is safe for
// concurrent use; share one Store, like one client, across all the limiters
// of a process. Create it with New.
type Store struct {
	c     *gomemcache.Client
	cfg   config
	queue *queue // nil with Options.NoLocalQueue
	stats *counters
	bg    inflight.Counter // round trips on their way, and clock reads: Close waits for them
	// clocks reads memcached's own clock for absolute expirations (nil
	// without Options.Servers).
	clocks *serverClocks

	closed atomic.Bool
}

var (
	_ store.Store      = (*Store)(nil)
	_ store.Deleter    = (*Store)(nil)
	_ store.Closer     = (*Store)(nil)
	_ store.CASBackend = (*casOps)(nil)
)

var (
	// ErrClosed is returned, wrapped in a *store.Error, by every call
	// after Close.
	ErrClosed = errors.New("sluice/memcache: store is closed")
	// ErrNoClient is returned, wrapped in a *store.Error, by every call
	// of a Store that New was given a nil client.
	ErrNoClient = errors.New("sluice/memcache: store has no client (New was given nil)")
	// ErrNoCAS is returned, wrapped in a *store.Error, when a server gives
	// an item no CAS id: a memcached started with -C, whose cas never
	// succeeds. The store needs gets, cas and add.
	ErrNoCAS = errors.New("sluice/memcache: the server gave the item no CAS id (memcached started with -C, CAS disabled): the store needs CAS")

	errNilMutation = errors.New("sluice/memcache: Update: nil mutation")
)

// Client returns the gomemcache client the store sends with, for reading
// the backend alongside the store (a harness, an admin tool).
func (s *Store) Client() *gomemcache.Client { return s.c }

// New returns a Store over c, configured by opts (nil means all defaults).
// The Store does not own c: Close leaves it usable, and the caller may share
// it. c's Timeout bounds how long a round trip abandoned at a caller's
// deadline keeps its goroutine and connection (see the package doc); its
// MaxIdleConns should cover the requests a process sends at once, or
// gomemcache dials a new connection for most of them. A nil c gives a Store
// whose every call fails with ErrNoClient.
func New(c *gomemcache.Client, opts *Options) *Store {
	s := &Store{c: c, cfg: opts.config()}
	s.clocks = newServerClocks(s.cfg.servers)
	s.stats = newCounters(s.cfg.retry.MaxAttempts)
	if s.cfg.localQueue {
		s.queue = newQueue()
	}
	return s
}

// ready reports why the store cannot take a call, or nil.
func (s *Store) ready(ctx context.Context, op string) error {
	switch {
	case s.c == nil:
		return &store.Error{Op: op, Err: ErrNoClient}
	case s.closed.Load():
		return &store.Error{Op: op, Err: ErrClosed}
	}
	if err := ctx.Err(); err != nil {
		return &store.Error{Op: op, Err: err}
	}
	return nil
}

// Update applies m to key's state atomically, by compare-and-swap (see
// store.CASUpdate): gets the item, m.Apply, then cas it (add when the key was
// absent), and on a conflict start over after a jittered backoff, at most
// Options.Retry.MaxAttempts times. m.Apply may therefore run more than once
// (a inproc.Retimer is retimed before each run); only the run whose write
// succeeded counts. When Apply returns a nil next, the update ends after the
// gets: one round trip. Concurrent Updates of one key through this Store
// take turns, in arrival order, unless Options.NoLocalQueue is set.
//
// Errors are *store.Error, all matching core.ErrUnavailable: a network
// or server error; ctx's error when it ends first (also at a backoff);
// *store.ContentionError when every attempt lost a race; and, matching
// core.ErrOutcomeUnknown as well, an error after which the write may have
// happened (a cas or add whose reply was lost or that was still running at
// ctx's deadline). Update never returns later than ctx's deadline by more
// than scheduling delay, even when the server stalls. It is safe for
// concurrent use.
func (s *Store) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	if err := s.ready(ctx, "update"); err != nil {
		return err
	}
	if m == nil {
		return &store.Error{Op: "update", Err: errNilMutation}
	}
	k := Key(key)
	if s.queue != nil {
		t, err := s.queue.wait(ctx, k)
		if err != nil {
			s.stats.errors.Add(1)
			return &store.Error{Op: "update", Err: err}
		}
		defer s.queue.done(t)
	}
	attempts, err := store.CASUpdate(ctx, (*casOps)(s), k, m, s.cfg.retry)
	s.stats.update(attempts, err)
	if err != nil {
		return &store.Error{Op: "update", Err: err}
	}
	return nil
}

// casOps is the store as store.CASUpdate sees it: Load and Swap on a type
// of its own, so that the Store exports neither to applications.
type casOps Store

// Load reads key with gets (store.CASBackend). It returns the item's value
// and the item itself as the token; nil and nil when the key is absent,
// expired or evicted.
func (o *casOps) Load(ctx context.Context, key string) (state []byte, token any, err error) {
	s := (*Store)(o)
	c := newCall(s, verbGets, key)
	if s.roundTrip(ctx, c) == abandoned {
		return nil, nil, fmt.Errorf("memcache gets: %w", ctx.Err())
	}
	it, err := c.item, c.err
	c.free()
	switch {
	case err == nil && it.CasID == 0:
		return nil, nil, fmt.Errorf("memcache gets: %w", ErrNoCAS)
	case err == nil:
		return it.Value, it, nil
	case errors.Is(err, gomemcache.ErrCacheMiss):
		return nil, nil, nil
	}
	return nil, nil, fmt.Errorf("memcache gets: %w", err)
}

// Swap writes next with ttl if key still holds what Load saw
// (store.CASBackend): cas with the token's CAS id, or add when the token is
// nil. It reports false, with no error, when another writer got there first:
// cas answered EXISTS (the item changed), NOT_FOUND (the item was deleted,
// expired or evicted: memcached answers a cas on a missing key so, whatever
// gomemcache's doc says, and the next Load sees the key absent and adds) or
// NOT_STORED; add answered NOT_STORED (the key exists).
func (o *casOps) Swap(ctx context.Context, key string, token any, next []byte, ttl time.Duration) (ok bool, err error) {
	s := (*Store)(o)
	exp := int32(MaxRelativeExpiration)
	if secs := relativeSeconds(ttl, s.cfg.skew); secs <= MaxRelativeExpiration {
		exp = int32(secs)
	} else if s.clocks != nil {
		now, ok := s.clocks.now(ctx, &s.bg)
		exp = absoluteExpiration(secs, now, ok)
	}
	var c *call
	if it, _ := token.(*gomemcache.Item); it != nil {
		c = newCall(s, verbCas, key)
		it.Value, it.Flags, it.Expiration = next, 0, exp
		c.item = it
	} else {
		c = newCall(s, verbAdd, key)
		c.add = gomemcache.Item{Key: key, Value: next, Expiration: exp}
	}
	v := c.verb
	f := s.roundTrip(ctx, c)
	if f == abandoned {
		return false, fmt.Errorf("memcache %s: %w", v, store.UnknownOutcome(ctx.Err()))
	}
	err = c.err
	c.free()
	switch {
	case err == nil:
		return true, nil
	case f == notSent:
		return false, fmt.Errorf("memcache %s: %w", v, err)
	case errors.Is(err, gomemcache.ErrCASConflict),
		errors.Is(err, gomemcache.ErrCacheMiss),
		errors.Is(err, gomemcache.ErrNotStored):
		s.stats.conflicts.Add(1)
		return false, nil
	case !mayHaveWritten(err):
		return false, fmt.Errorf("memcache %s: %w", v, err)
	}
	return false, fmt.Errorf("memcache %s: %w", v, store.UnknownOutcome(err))
}

// mayHaveWritten reports whether a write that failed with err may still have
// been stored. Errors raised before anything was sent rule it out (a failed
// or timed-out dial, no server to send to, a key gomemcache refused), and
// so does the server's own refusal, SERVER_ERROR or CLIENT_ERROR (a value
// above its item size limit, 1 MB by default, or no memory to store it):
// memcached answers so only for what it did not store. Any other error (a
// deadline or broken connection while the request or its reply was on the
// wire) leaves the outcome unknown.
func mayHaveWritten(err error) bool {
	var cte *gomemcache.ConnectTimeoutError
	var oe *net.OpError
	switch {
	case errors.As(err, &cte),
		errors.As(err, &oe) && oe.Op == "dial",
		errors.Is(err, gomemcache.ErrNoServers),
		errors.Is(err, gomemcache.ErrMalformedKey),
		refusedByServer(err):
		return false
	}
	return true
}

// refusedByServer reports whether err is gomemcache's report of a
// SERVER_ERROR or CLIENT_ERROR reply to a storage command, which it gives
// as an untyped "unexpected response line" quoting the reply.
func refusedByServer(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "unexpected response line") &&
		(strings.Contains(msg, `"SERVER_ERROR `) || strings.Contains(msg, `"CLIENT_ERROR `))
}

// Delete removes key's state, so that its next decision starts fresh.
// Deleting an absent key is not an error. Errors are *store.Error and
// match core.ErrUnavailable; one after which the delete may still land
// (abandoned at ctx's end, or failed once sent) also matches
// core.ErrOutcomeUnknown.
func (s *Store) Delete(ctx context.Context, key store.Key) error {
	if err := s.ready(ctx, "delete"); err != nil {
		return err
	}
	c := newCall(s, verbDelete, Key(key))
	f := s.roundTrip(ctx, c)
	var err error
	if f == abandoned {
		// Sent, and it may still land.
		err = store.UnknownOutcome(ctx.Err())
	} else {
		err = c.err
		c.free()
		switch {
		case err == nil, errors.Is(err, gomemcache.ErrCacheMiss):
			return nil
		case f != notSent && mayHaveWritten(err):
			err = store.UnknownOutcome(err)
		}
	}
	if err != nil {
		s.stats.errors.Add(1)
		return &store.Error{Op: "delete", Err: fmt.Errorf("memcache delete: %w", err)}
	}
	return nil
}

// Stats returns the store's counters, among them the retry distribution.
// It is safe to call at any time, also after Close.
func (s *Store) Stats() Stats { return s.stats.snapshot() }

// Close makes every later call fail with ErrClosed, and every call under
// way fail so at its next round trip (a compare-and-swap loop sends nothing
// more), and waits for the round trips on their way to end, those
// abandoned at a caller's deadline too (each within the client's Timeout),
// so that no goroutine of the Store outlives it. It leaves the client
// open. Close is idempotent and always returns nil.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.bg.Close()
	if s.clocks != nil {
		s.clocks.close() // a clock read needs no more than a round trip does
	}
	s.bg.Wait()
	return nil
}
