package valkey

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/store"
	valkeygo "github.com/valkey-io/valkey-go"
)

// DefaultClockSkew is Options.ClockSkew when it is zero.
const DefaultClockSkew = time.Second

// Options configures a Store. A nil *Options means the defaults; so does
// the zero value of every field.
type Options struct {
	// Retry bounds the compare-and-set loop of Update, the path taken by
	// algorithms without a Lua twin and by limiters with Config.NoScript.
	// The zero value means core's defaults (64 attempts, 100µs to 5ms
	// jittered backoff).
	Retry store.RetryPolicy
	// ClockSkew is the largest disagreement between the clocks of the
	// fleet's instances. On Update's path each instance's own clock
	// decides, and the TTL an algorithm gives is measured on the writer's
	// clock: an instance whose clock is behind would find the key expired
	// while, by its clock, the state still holds. Update lengthens every
	// TTL by ClockSkew so that it does not; that costs only memory. Zero
	// means DefaultClockSkew; negative means no allowance (one clock); more
	// than store.MaxClockSkew means that.
	// Scripts are not affected: they set their own TTLs, on the server's
	// clock unless the Limiter injects one.
	ClockSkew time.Duration
	// OnWarning, when set, hears each *core.EvictionWarning that the
	// store's background check of the servers' maxmemory-policy finds (see
	// Store.Check): when the store is built, and every minute. It is called
	// from a goroutine of the store's, one call at a time.
	OnWarning func(error)
}

// Store keeps Sluice's state in Valkey (or Redis) through a valkey-go
// client. It is safe for concurrent use; share one Store, like one client,
// across all limiters of a process.
type Store struct {
	c         valkeygo.Client
	sh        *shared // c's shared connection, as the store sends on it
	retry     store.RetryPolicy
	skew      time.Duration
	args      argCache
	closed    atomic.Bool
	bad       error // why every call fails (a client the store must not use)
	owned     bool  // Open built c: Close closes it
	onWarning func(error)
	watch     *evictWatch // the background checks of the eviction policy
	direct    *direct     // nil: every command takes the client's pipeline
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.ScriptRunner = (*Store)(nil)
	_ store.Deleter      = (*Store)(nil)
	_ store.Closer       = (*Store)(nil)
)

// New returns a Store over c, a single-node, sentinel or cluster client.
// The Store does not own c: Close leaves it open, and the caller closes it
// after the Store is no longer used. A nil c gives a Store whose every call
// fails with an error matching core.ErrUnavailable; so does a client built
// with a ClientOption.ConnLifetime (see the package doc: valkey-go would
// send a script again), with an error that says so. Prefer Open, which
// refuses such an option at once.
func New(c valkeygo.Client, opts *Options) *Store {
	s := &Store{c: c, skew: DefaultClockSkew}
	if opts != nil {
		s.retry = opts.Retry
		s.onWarning = opts.OnWarning
		switch {
		case opts.ClockSkew > 0:
			s.skew = min(opts.ClockSkew, store.MaxClockSkew)
		case opts.ClockSkew < 0:
			s.skew = 0
		}
	}
	if c == nil {
		return s
	}
	if hasConnLifetime(c) {
		s.bad = errConnLifetime
		return s
	}
	s.sh = newShared(c)
	s.direct = newDirect(c, s.sh)
	s.watchEviction()
	return s
}

// Client returns the client the store sends with: the one given to New,
// or the one Open built (which Close closes), for reading the backend
// alongside the store (a harness, an admin tool).
func (s *Store) Client() valkeygo.Client { return s.c }

// Open builds a valkey-go client from opt and returns a Store over it that
// owns it: Close closes the client too. It refuses, before connecting, an
// opt with ConnLifetime set: valkey-go re-sends any command, writes
// included, that fails on an expired connection, so a limiter script could
// run twice (see the package doc). Other errors are valkeygo.NewClient's.
func Open(opt valkeygo.ClientOption, opts *Options) (*Store, error) {
	if opt.ConnLifetime != 0 {
		return nil, fmt.Errorf("%w (got %s)", errConnLifetime, opt.ConnLifetime)
	}
	c, err := valkeygo.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("sluice/valkey: %w", err)
	}
	s := New(c, opts)
	s.owned = true
	return s, nil
}

var (
	errClosed   = errors.New("sluice/valkey: store is closed")
	errNoClient = errors.New("sluice/valkey: store has no client (New was given nil)")
	// errConnLifetime: the client re-sends writes on an expired connection.
	errConnLifetime = errors.New("sluice/valkey: ClientOption.ConnLifetime must be zero for a limiter's client: " +
		"valkey-go sends any command again, writes included, that fails on an expired connection, which can run a script twice")
)

// hasConnLifetime reports whether c, one of valkey-go's own clients, was
// built with ClientOption.ConnLifetime set. valkey-go keeps that only in
// unexported fields (read here with reflect: a bool hasLftm on its single,
// cluster and sentinel clients, the options on its standalone one); a client
// of another type (a wrapper) is taken as it is. The store's tests hold this
// to every kind of client valkey-go builds.
func hasConnLifetime(c valkeygo.Client) bool {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	v = v.Elem()
	if f := v.FieldByName("hasLftm"); f.IsValid() && f.Kind() == reflect.Bool {
		return f.Bool()
	}
	for _, name := range [...]string{"opt", "mOpt"} {
		f := v.FieldByName(name)
		if f.IsValid() && f.Type() == reflect.TypeFor[*valkeygo.ClientOption]() && !f.IsNil() {
			if l := f.Elem().FieldByName("ConnLifetime"); l.IsValid() && l.Kind() == reflect.Int64 {
				return l.Int() != 0
			}
		}
	}
	return false
}

// ready reports why the store cannot take a call, or nil.
func (s *Store) ready(ctx context.Context, op string) error {
	switch {
	case s.c == nil:
		return &store.Error{Op: op, Err: errNoClient}
	case s.bad != nil:
		return &store.Error{Op: op, Err: s.bad}
	case s.closed.Load():
		return &store.Error{Op: op, Err: errClosed}
	}
	if err := ctx.Err(); err != nil {
		// Nothing has been sent: the outcome is known (nothing happened).
		return &store.Error{Op: op, Err: err}
	}
	return nil
}

// Delete removes key's state, so that its next decision starts fresh.
// Deleting an absent key is not an error. Errors are *store.Error and
// match core.ErrUnavailable; one after which the delete may still land (a
// timeout or a cancellation once it was sent) also matches
// core.ErrOutcomeUnknown.
func (s *Store) Delete(ctx context.Context, key store.Key) error {
	if err := s.ready(ctx, "delete"); err != nil {
		return err
	}
	resp := s.sh.Do(ctx, s.c.B().Del().Key(key.String()).Build())
	if err := resp.Error(); err != nil {
		return storeError("delete", err, true)
	}
	return nil
}

// onPipeline is ctx for a command on valkey-go's shared connection: its
// Done and Err, and no deadline. valkey-go sends a command that finds the
// connection idle synchronously, with the socket's deadline set to the
// command's own; when that deadline passes it closes the connection, and
// every command queued behind it then fails at that deadline, not its own
// (in a stall longer than Config.Timeout, calls that started up to a
// Timeout later failed with the first). Without a deadline valkey-go
// queues the command for its writer and reader goroutines and, when ctx
// ends, returns ctx.Err() at once and leaves the connection up for the
// others: each call ends at its own deadline, never before. A dedicated
// connection, one command at a time, keeps the deadline on its socket.
func onPipeline(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); !ok {
		return ctx
	}
	return noDeadline{ctx}
}

// noDeadline is a context whose deadline is hidden; it still ends with
// its parent.
type noDeadline struct{ context.Context }

func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }

// send sends a script's command: down one of the store's dedicated
// connections while few are in flight, through the client's pipeline
// otherwise, in batches when many are (see direct). A non-nil error says
// the command waited for a batch until ctx ended (see batcher.do).
func (s *Store) send(ctx context.Context, cmd valkeygo.Completed) (valkeygo.ValkeyResult, error) {
	if s.direct != nil {
		return s.direct.do(ctx, cmd)
	}
	return s.sh.Do(ctx, cmd), nil
}

// Close marks the Store closed: later calls fail with an error matching
// core.ErrUnavailable, and the background checks of the eviction policy
// end. It does not close a valkey-go client given to New, which the caller
// owns and may share; it closes the one Open built. The store's own
// connections are closed, and Close waits for that: on a server that does
// not answer, about a second at most, and about two when it closes the
// client Open built (valkey-go's own Close waits that long). Close is
// idempotent and always returns nil.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.watch.stop()
	// Everything is given back, and the store's own client closed, at
	// once; then Close waits for it all: a second on a silent server,
	// not a second for each.
	if s.direct != nil {
		s.direct.close()
	}
	if s.sh != nil {
		s.sh.close()
	}
	var client sync.WaitGroup
	if s.owned {
		client.Go(s.c.Close)
	}
	if s.direct != nil {
		s.direct.drops.wait()
	}
	if s.sh != nil {
		s.sh.drops.wait()
	}
	client.Wait()
	return nil
}
