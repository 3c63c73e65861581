package core

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"time"
)

// Defaults and bounds of DenyCacheOptions.
const (
	// DefaultDenyCacheSize is the number of entries of a deny cache whose
	// Size is zero.
	DefaultDenyCacheSize = 4096
	// MaxDenyCacheSize caps DenyCacheOptions.Size.
	MaxDenyCacheSize = 1 << 20
	// DefaultDenyCacheMaxAge bounds how long one refusal is held when
	// MaxAge is zero.
	DefaultDenyCacheMaxAge = 10 * time.Second
)

// DenyCacheOptions configures a Limiter's local deny cache (envoy's
// over-limit cache): an identity the store refused is refused again, in
// process and without a store call, at the same cost, until the refusal's
// RetryAfter has passed or MaxAge, whichever is sooner, with the store's
// RetryAfter (counted down: the cache never shortens it). A flood by one
// identity so costs the store one call per RetryAfter (or MaxAge) instead
// of one per request. Another cost goes to the store: a smaller one may be
// admitted, and a larger one waits longer than the refusal held says.
//
// It never admits: a request it does not refuse goes to the store. And it
// refuses only what the store would: a refusal means that the same request
// cannot be admitted before RetryAfter if nothing else happens, and
// whatever else happens (other instances' admissions) only takes more. The
// time is read before the store call, so a cached refusal ends no later
// than the store's. Three things can free a quota sooner, and the cache
// does not see them on other instances (nor a Multi's refund): a Reset, a
// refund (Receipt.Refund, a Reservation settled below its estimate), and
// a change of the policy; MaxAge bounds how long a refusal outlives any of
// them. This Limiter's own Resets and refunds drop the identity's
// refusal, and one still on its way from the store when they came is not
// held.
//
// Memory is bounded: Size slots of one pointer each (8 bytes), plus 56
// bytes for each refusal held, and 8 KiB of counters of refunds (a refund
// keeps refusals on their way from being held for the identities whose
// counter it shares, 1 in 1024). Identities share a slot by hash (the later
// refusal takes it; the other identity then simply asks the store again),
// and match by a 128-bit keyed hash, so one identity is never refused for
// another.
//
// The cache applies to AllowN over a store that is not InProcess (an
// in-process store decides as fast as the cache would); Acquire is never
// cached (a Release may free a slot at any time).
type DenyCacheOptions struct {
	// Size is the number of slots, rounded up to a power of two and capped
	// at MaxDenyCacheSize. Zero or negative means DefaultDenyCacheSize
	// (4096: 32 KiB).
	Size int
	// MaxAge bounds how long a refusal is held, whatever its RetryAfter.
	// Zero or negative means DefaultDenyCacheMaxAge (10 s).
	MaxAge time.Duration
}

// denyCache is a direct-mapped table of refusals, read without a lock.
type denyCache struct {
	seed1, seed2 maphash.Seed
	mask         uint64
	maxAge       int64 // µs
	slots        []atomic.Pointer[denied]
	// freedAt counts, by stripe of the identities' hashes, the times this
	// Limiter gave units back to a key (a refund, a Reset): a refusal the
	// store decided before one of them is not held (put).
	freedAt [freedStripes]atomic.Uint64
}

const freedStripes = 1024

// denied is one refusal held: of cost n, until until (µs on the Limiter's
// clock), whose wait ends at retry.
type denied struct {
	h1, h2    uint64
	n         int64
	until     int64
	retry     int64
	reset     int64
	limit     int64
	remaining int64
}

func newDenyCache(o *DenyCacheOptions) *denyCache {
	size, age := o.Size, o.MaxAge
	if size <= 0 {
		size = DefaultDenyCacheSize
	}
	size = min(size, MaxDenyCacheSize)
	size = 1 << bits.Len(uint(size-1))
	if age <= 0 {
		age = DefaultDenyCacheMaxAge
	}
	return &denyCache{
		seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), mask: uint64(size - 1),
		maxAge: int64(age / time.Microsecond), slots: make([]atomic.Pointer[denied], size),
	}
}

func (c *denyCache) hash(identity string) (uint64, uint64) {
	return maphash.String(c.seed1, identity), maphash.String(c.seed2, identity)
}

// get returns the refusal held for identity at cost n at now, if any, and
// otherwise the mark that put needs for the store's answer.
func (c *denyCache) get(identity string, n, now int64) (Decision, bool, uint64) {
	h1, h2 := c.hash(identity)
	mark := c.freedAt[h1%freedStripes].Load()
	e := c.slots[h1&c.mask].Load()
	if e == nil || e.h1 != h1 || e.h2 != h2 || n != e.n || now >= e.until {
		return Decision{}, false, mark
	}
	return Decision{
		Limit: e.limit, Remaining: e.remaining,
		RetryAfter: Micros(e.retry - now), ResetAfter: Micros(max(e.reset-now, 0)),
	}, true, mark
}

// put holds the store's refusal d of cost n for identity, decided no
// sooner than now, and after get returned mark. A refusal that units given
// back since (freed) may have overtaken is not held: freed counts itself
// after the store took the units back and then drops the slot's refusal,
// so either put sees the count moved, or freed's drop comes after put's
// store.
func (c *denyCache) put(identity string, n, now int64, d Decision, mark uint64) {
	retry := int64(d.RetryAfter / time.Microsecond)
	if retry <= 0 {
		return
	}
	h1, h2 := c.hash(identity)
	freed := &c.freedAt[h1%freedStripes]
	if freed.Load() != mark {
		return
	}
	e := &denied{
		h1: h1, h2: h2, n: n, until: now + min(retry, c.maxAge), retry: now + retry,
		reset: now + int64(d.ResetAfter/time.Microsecond), limit: d.Limit, remaining: d.Remaining,
	}
	s := &c.slots[h1&c.mask]
	s.Store(e)
	if freed.Load() != mark {
		s.CompareAndSwap(e, nil)
	}
}

// freed forgets identity's refusal once this Limiter has given units back
// to its key (a refund, the delete of a Reset), whatever the store
// answered, and keeps one on its way from being held (put).
func (c *denyCache) freed(identity string) {
	h1, h2 := c.hash(identity)
	c.freedAt[h1%freedStripes].Add(1)
	s := &c.slots[h1&c.mask]
	if e := s.Load(); e != nil && e.h1 == h1 && e.h2 == h2 {
		s.CompareAndSwap(e, nil)
	}
}
