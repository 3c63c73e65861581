package valkey

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core"
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
	Retry core.RetryPolicy
	// ClockSkew is the largest disagreement between the clocks of the
	// fleet's instances. On Update's path each instance's own clock
	// decides, and the TTL an algorithm gives is measured on the writer's
	// clock: an instance whose clock is behind would find the key expired
	// while, by its clock, the state still holds. Update lengthens every
	// TTL by ClockSkew so that it does not; that costs only memory. Zero
	// means DefaultClockSkew; negative means no allowance (one clock).
	// Scripts are not affected: they set their own TTLs, on the server's
	// clock unless the Limiter injects one.
	ClockSkew time.Duration
}

// Store keeps Sluice's state in Valkey (or Redis) through a valkey-go
// client. It is safe for concurrent use; share one Store, like one client,
// across all limiters of a process.
type Store struct {
	c      valkeygo.Client
	retry  core.RetryPolicy
	skew   time.Duration
	args   argCache
	closed atomic.Bool
}

var (
	_ core.Store        = (*Store)(nil)
	_ core.ScriptRunner = (*Store)(nil)
	_ core.Deleter      = (*Store)(nil)
	_ core.Closer       = (*Store)(nil)
)

// New returns a Store over c, a single-node, sentinel or cluster client.
// The Store does not own c: Close leaves it open, and the caller closes it
// after the Store is no longer used. A nil c gives a Store whose every call
// fails with an error matching core.ErrUnavailable.
func New(c valkeygo.Client, opts *Options) *Store {
	s := &Store{c: c, skew: DefaultClockSkew}
	if opts != nil {
		s.retry = opts.Retry
		switch {
		case opts.ClockSkew > 0:
			s.skew = opts.ClockSkew
		case opts.ClockSkew < 0:
			s.skew = 0
		}
	}
	return s
}

var (
	errClosed   = errors.New("sluice/valkey: store is closed")
	errNoClient = errors.New("sluice/valkey: store has no client (New was given nil)")
)

// ready reports why the store cannot take a call, or nil.
func (s *Store) ready(ctx context.Context, op string) error {
	switch {
	case s.c == nil:
		return &core.StoreError{Op: op, Err: errNoClient}
	case s.closed.Load():
		return &core.StoreError{Op: op, Err: errClosed}
	}
	if err := ctx.Err(); err != nil {
		// Nothing has been sent: the outcome is known (nothing happened).
		return &core.StoreError{Op: op, Err: err}
	}
	return nil
}

// Delete removes key's state, so that its next decision starts fresh.
// Deleting an absent key is not an error. Errors are *core.StoreError and
// match core.ErrUnavailable.
func (s *Store) Delete(ctx context.Context, key core.Key) error {
	if err := s.ready(ctx, "delete"); err != nil {
		return err
	}
	resp := s.c.Do(ctx, s.c.B().Del().Key(key.String()).Build())
	if err := resp.Error(); err != nil {
		return storeError("delete", err, false)
	}
	return nil
}

// Close marks the Store closed: later calls fail with an error matching
// core.ErrUnavailable. It does not close the valkey-go client, which the
// caller owns and may share. Close is idempotent and always returns nil.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}
