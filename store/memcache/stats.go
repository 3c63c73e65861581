package memcache

import (
	"sync/atomic"

	"github.com/sluicehq/sluice/store"
)

// Stats counts what a Store has done since New. The counters are read one
// by one, not as one snapshot, so under load they may disagree by the few
// updates in flight.
type Stats struct {
	// Updates counts Update calls that ran the compare-and-swap loop.
	Updates uint64
	// Attempts is the retry distribution: Attempts[i] counts the updates
	// that made i attempts (a gets, then a cas or add unless nothing needed
	// writing), for i from 1 to the retry bound; Attempts[0] is unused. An
	// update that failed is counted at the attempt it failed in.
	Attempts []uint64
	// Conflicts counts swaps that lost to another writer (a cas that met a
	// newer or vanished item, an add that met an existing one): each cost
	// one more attempt.
	Conflicts uint64
	// Contention counts updates that gave up after the retry bound
	// (*store.ContentionError).
	Contention uint64
	// Errors counts Update and Delete calls that returned an error,
	// Contention included, except those refused before doing anything (a
	// closed Store, no client, a context that had already ended).
	Errors uint64
	// Abandoned counts round trips still running when the caller's context
	// ended: the call returned at its deadline and the round trip finished
	// (or timed out at the client's Timeout) in the background.
	Abandoned uint64
	// LateWrites counts abandoned swaps that were stored after all: their
	// caller got an error matching core.ErrOutcomeUnknown, but the write
	// happened. Abandoned swaps that were not stored are not counted.
	LateWrites uint64
}

// counters are the live Stats.
type counters struct {
	updates, conflicts, contention, errors, abandoned, lateWrites atomic.Uint64
	attempts                                                      []atomic.Uint64
}

func newCounters(maxAttempts int) *counters {
	return &counters{attempts: make([]atomic.Uint64, maxAttempts+1)}
}

func (c *counters) update(attempts int, err error) {
	c.updates.Add(1)
	if attempts >= 0 && attempts < len(c.attempts) {
		c.attempts[attempts].Add(1)
	}
	if err != nil {
		c.errors.Add(1)
		if _, ok := err.(*store.ContentionError); ok {
			c.contention.Add(1)
		}
	}
}

func (c *counters) snapshot() Stats {
	s := Stats{
		Updates:    c.updates.Load(),
		Attempts:   make([]uint64, len(c.attempts)),
		Conflicts:  c.conflicts.Load(),
		Contention: c.contention.Load(),
		Errors:     c.errors.Load(),
		Abandoned:  c.abandoned.Load(),
		LateWrites: c.lateWrites.Load(),
	}
	for i := range c.attempts {
		s.Attempts[i] = c.attempts[i].Load()
	}
	return s
}
