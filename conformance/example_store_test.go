package conformance_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// This file is the store author's guide in code (see "Writing a store" in
// the package doc): a complete store over a table of versioned rows, the
// shape of a SQL or document-database store, made atomic by the shared
// compare-and-swap loop, and the test that puts it through the suite.

// table stands for the database server: rows with a version and an
// expiry read by the server's own clock. Every client (every instance of a
// fleet) talks to the same table.
type table struct {
	mu   sync.Mutex
	rows map[string]row
	now  func() time.Time // the server's clock
}

type row struct {
	state   []byte
	version uint64
	expires time.Time
}

func newTable() *table { return &table{rows: map[string]row{}, now: time.Now} }

// live returns the row of key that has not expired. An expired row is
// absent, exactly as a key the server has already dropped: a store that
// let it stand in the way of a new one would refuse that key forever.
func (t *table) live(key string) (row, bool) {
	r, ok := t.rows[key]
	if !ok || !t.now().Before(r.expires) {
		return row{}, false
	}
	return r, true
}

// rowStore is one client of the table: the Store a Limiter is given.
type rowStore struct {
	t *table
	// skew is added to every TTL: instances decide by their own clocks,
	// and a state must outlive its TTL on the clock of the slowest of them.
	skew  time.Duration
	retry store.RetryPolicy
}

var (
	_ store.Store       = (*rowStore)(nil)
	_ store.Deleter     = (*rowStore)(nil)
	_ store.ClockSkewer = (*rowStore)(nil)
)

// Update is the whole contract: an atomic read-modify-write of one key.
// store.CASUpdate runs the loop (load, apply, swap, back off and retry on a
// conflict, give up with a *store.ContentionError); the store gives it Load
// and Swap through an unexported type, so that applications never see them.
func (s *rowStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	_, err := store.CASUpdate(ctx, rowCAS{s}, key.String(), m, s.retry)
	return err
}

// Delete removes key (Limiter.Reset).
func (s *rowStore) Delete(ctx context.Context, key store.Key) error {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	delete(s.t.rows, key.String())
	return nil
}

// ClockSkew declares the skew the example store's TTLs allow for
// (store.ClockSkewer), so that a Limiter over it clamps a stored time that a
// clock far ahead wrote: without it one instance an hour fast would hold
// every key it touched an hour in the future (the suite's FastClock check).
func (s *rowStore) ClockSkew() time.Duration { return s.skew }

type rowCAS struct{ s *rowStore }

// Load returns the live state and its version as the token; an absent or
// expired row is (nil, nil).
func (c rowCAS) Load(ctx context.Context, key string) ([]byte, any, error) {
	if err := ctx.Err(); err != nil {
		// A real client returns its network errors here, wrapped so that
		// they match core.ErrUnavailable (see store.Error).
		return nil, nil, &store.Error{Op: "load", Err: err}
	}
	c.s.t.mu.Lock()
	defer c.s.t.mu.Unlock()
	r, ok := c.s.t.live(key)
	if !ok {
		return nil, nil, nil
	}
	return append([]byte(nil), r.state...), r.version, nil
}

// Swap writes next if the row still holds the version Load saw, or, for a
// nil token, if there is still no live row: the SQL of it is an upsert
// whose condition is "version = $token OR expires <= now()", never an
// insert that does nothing when an expired row is in the way.
func (c rowCAS) Swap(ctx context.Context, key string, token any, next []byte, ttl time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, &store.Error{Op: "swap", Err: err}
	}
	c.s.t.mu.Lock()
	defer c.s.t.mu.Unlock()
	cur, live := c.s.t.live(key)
	switch {
	case token == nil && live:
		return false, nil // another writer created it first
	case token != nil && (!live || cur.version != token.(uint64)):
		return false, nil // changed, or expired, since Load
	}
	if ttl <= 0 {
		// The state may vanish at once: dropping it reads the same.
		delete(c.s.t.rows, key)
		return true, nil
	}
	c.s.t.rows[key] = row{
		state:   append([]byte(nil), next...),
		version: cur.version + 1,
		expires: c.s.t.now().Add(ttl + c.s.skew),
	}
	return true, nil
}

// rowHarness gives the suite fresh clients of one table.
type rowHarness struct{ t *table }

func (h rowHarness) NewStore(testing.TB) store.Store {
	return &rowStore{t: h.t, skew: time.Second}
}

func (rowHarness) Capabilities() conformance.Capabilities {
	// The generic path only (no scripts), under a fleet whose clocks are
	// up to a second apart: the TTLs above allow for it.
	return conformance.Capabilities{ClockSkew: time.Second}
}

// Exists lets the suite look into the table (conformance.Inspector).
func (h rowHarness) Exists(_ context.Context, key store.Key) (bool, error) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	_, ok := h.t.live(key.String())
	return ok, nil
}

// TTL lets the suite read how long a row has left
// (conformance.TTLInspector).
func (h rowHarness) TTL(_ context.Context, key store.Key) (time.Duration, bool, error) {
	h.t.mu.Lock()
	defer h.t.mu.Unlock()
	r, ok := h.t.live(key.String())
	return r.expires.Sub(h.t.now()), ok, nil
}

// TestExampleStore proves the example store with the suite, as a store
// author's own test would.
func TestExampleStore(t *testing.T) {
	t.Parallel() // Retention waits out states of seconds
	tab := newTable()
	conformance.Run(t, func(t *testing.T) conformance.Harness { return rowHarness{tab} })
}

// Example_store shows the store of this file deciding for a Limiter.
func Example_store() {
	s := &rowStore{t: newTable(), skew: time.Second}
	l, err := core.New(core.Config{
		Policy:    core.Policy{Name: "api", Limit: 2, Window: time.Minute},
		Algorithm: algorithm.FixedWindow{},
		Store:     s,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		d, err := l.Allow(context.Background(), "client-1")
		fmt.Println(d.Allowed, d.Remaining, err)
	}
	// Output:
	// true 1 <nil>
	// true 0 <nil>
	// false 0 <nil>
}
