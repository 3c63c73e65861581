package conformance

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/store"
)

// stuckStore is refStore with the defect of a SQL store whose write of a
// new key is `INSERT … ON CONFLICT DO NOTHING` and whose expired rows stay
// in the table until something deletes them: an expired key reads as
// absent, so the algorithm starts it fresh, but the insert meets the old
// row and writes nothing. Every key then fails, or (silent) admits without
// remembering, for ever after its first expiry. Exists is right: the
// expired row reads as gone.
type stuckStore struct {
	*refStore
	silent bool // report success for the write that did nothing
}

var errStuck = errors.New("stuck store: the insert of a new key met an existing row and wrote nothing")

func (s stuckStore) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k, now := key.String(), s.now(m)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, held := s.m[k]
	live := held && now.Before(e.expires)
	next, ttl := m.Apply(s.load(k, now))
	switch {
	case next == nil:
		return nil
	case held && !live: // ON CONFLICT DO NOTHING
		if s.silent {
			return nil
		}
		return errStuck
	}
	s.store(k, next, ttl, now)
	return nil
}

// A store that can never rewrite an expired key fails Expiry, whether it
// reports the failed write or hides it: the suite decides on each key after
// it has expired, and wants a fresh quota, remembered.
func TestStuckAfterExpiryFailsExpiry(t *testing.T) {
	for _, c := range []struct {
		name   string
		silent bool
		want   string
	}{
		{"reported", false, "after its key expired"},
		{"silent", true, "after its key expired"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stuck := func(testing.TB) Harness {
				silent := c.silent
				return inspectingHarness{&harness{backend: newRefStore(), newClient: func(s *refStore) store.Store {
					return stuckStore{refStore: s, silent: silent}
				}}}
			}
			check := func(tb testing.TB, e *env) { checkExpiry(tb, e.h, algorithm.All(), false) }
			expectFailure(t, check, stuck, algorithm.GCRA{}, c.want)
		})
	}
}

// The reference store, whose expired entries also stay behind until they
// are written again (the fix of the defect above: an upsert), passes
// Expiry for every algorithm, on both paths.
func TestRewritableExpiredRowsPassExpiry(t *testing.T) {
	for _, script := range []bool{false, true} {
		newClient := plain
		if script {
			newClient = scripted
		}
		r := record(t, func(tb testing.TB) {
			h := maker(newClient, Capabilities{Scripts: script}, true)(tb)
			checkExpiry(tb, h, algorithm.All(), script)
		})
		if r.Failed() {
			t.Errorf("script %v: the reference store failed Expiry:\n%s", script, r)
		}
	}
}
