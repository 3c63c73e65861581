package algorithm

import (
	"encoding/binary"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// ConcurrencyMaxLimit is the largest Policy.Limit the concurrency algorithm
// accepts: it keeps one entry per lease held, so Limit bounds the size of a
// key.
const ConcurrencyMaxLimit = 10_000

// Concurrency limits the work in flight: at most Policy.Limit leases held
// at once. Acquire takes a lease until Release gives it back or, if its
// holder never does, until LeaseTTL (Policy.LeaseTTLMicros()) after it was
// taken; then its slot is reclaimed.
//
// The state is the list of leases held, each a lease id and an expiry in
// µs, kept sorted by expiry. Every call first ignores the leases whose
// expiry is at or before now; a call that writes also drops them.
//
// Bound: when an Acquire is admitted at now, the leases acquired and
// neither released nor expired at H (the latest now of any call that wrote
// the key, this one included) number at most Limit. With a clock that
// never steps back H is now: the leases in flight never exceed Limit at any
// instant. A clock that steps back never brings back a lease already
// dropped, and a lease taken then expires LeaseTTL after that earlier now.
//
// Clock skew (see the package doc; s is the store's ClockSkew, X the offset
// of one instance): with X <= s, in flight never exceeds Limit as long as
// holders release within LeaseTTL − X. With X > s a lease the off instance
// took is reclaimed at most LeaseTTL + s after a correct instance's next
// decision, not when real time catches up with its clock. Each handoff
// between the two time lines (a decision of one just after a write of the
// other) may reclaim the other's leases X (reader ahead) or X − s (reader
// behind) early: at most Limit more in flight per handoff.
//
// Memory per key: the Go state is 1 + 16·k bytes for k leases (a version
// byte, then an expiry and an id per lease), at most 160,001 bytes since
// CheckPolicy caps Limit at ConcurrencyMaxLimit. The Lua twin keeps a Redis
// sorted set, one member per lease (score: expiry µs; member: the lease id
// in decimal, or "0:<expiry>:<i>" for an anonymous lease): by MEMORY USAGE
// about 37 bytes a lease in Redis's listpack encoding (up to 128 members by
// default), about 130 beyond, with random 64-bit ids. Each decision costs
// O(k) in Go and O(log k) in Redis.
//
// Decision: Remaining is Limit minus the leases held after the call;
// RetryAfter, on a denial, is the time until enough leases expire for one
// more to fit (a Release may free a slot sooner); ResetAfter is the time
// until the last lease held expires, which is also the key's TTL. A denial
// writes nothing. Concurrency has no fields and is safe for concurrent use.
type Concurrency struct{}

var (
	_ core.Leaser        = Concurrency{}
	_ core.Scripted      = Concurrency{}
	_ core.PolicyChecker = Concurrency{}
)

var concurrencyScript = loadScript("concurrency")

// Name returns "concurrency".
func (Concurrency) Name() string { return "concurrency" }

// Quota returns p.Limit, the leases that may be held at once.
func (Concurrency) Quota(p *core.Policy) int64 { return p.Limit }

// Script returns the Lua twin, lua/concurrency.lua.
func (Concurrency) Script() *store.Script { return concurrencyScript }

// CheckPolicy rejects, with a *core.PolicyError naming Limit, a Limit above
// ConcurrencyMaxLimit, on top of what p.Validate checks.
func (Concurrency) CheckPolicy(p *core.Policy) error {
	return capLimit(p, ConcurrencyMaxLimit, "the concurrency limit, which keeps one entry per lease held")
}

// Step takes one anonymous lease (id 0): Acquire(state, now, 0, p). Such a
// lease cannot be released; only its LeaseTTL frees its slot. n is
// ignored: a call holds one slot, as Acquire does (the Limiter sends
// concurrency calls through Acquire, never through Step).
func (c Concurrency) Step(state []byte, now, n int64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	return c.Acquire(state, now, 0, p)
}

// Acquire takes a slot for lease at now, expiring at now + LeaseTTL, if
// fewer than Limit leases are held. Acquiring a lease that is already held
// renews its expiry (and takes no second slot), but only when it would be
// admitted as a new lease. Lease 0 is anonymous: each Acquire of it takes a
// slot of its own. See the type's doc for the bound.
//
// Overflow: now is clamped to [0, 2^52) and LeaseTTL is at most
// core.MaxWindow < 2^42 µs, so expiries stay below 2^53.
func (Concurrency) Acquire(state []byte, now int64, lease uint64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	limit := p.Limit
	now = bkClamp(now)
	count, ok := ccDecode(state)
	lo := ccFirstLive(state, count, now)
	held := int64(count - lo)
	d := core.Decision{Limit: limit}
	if held >= limit {
		// One more fits once the (held−limit+1)-th earliest lease expires:
		// index held−limit among the live ones, sorted by expiry. (held
		// exceeds limit only if the policy's Limit shrank.)
		d.RetryAfter = core.Micros(ccExpiry(state, lo+int(held-limit)) - now)
		d.ResetAfter = core.Micros(ccExpiry(state, count-1) - now)
		return nil, 0, d
	}
	var next []byte
	if ok {
		// Drop the expired prefix, in place.
		next = state[:1+copy(state[1:], state[1+lo*ccEntry:1+count*ccEntry])]
	} else {
		next = append(state[:0], ccVersion)
	}
	count -= lo
	if lease != 0 {
		if j := ccFind(next, count, lease); j >= 0 {
			next = ccRemove(next, j)
			count--
		}
	}
	exp := now + p.LeaseTTLMicros()
	// The new lease usually expires last; search from the end.
	pos := count
	for pos > 0 && ccExpiry(next, pos-1) > exp {
		pos--
	}
	next = append(next, ccZero[:]...)
	at := 1 + pos*ccEntry
	copy(next[at+ccEntry:], next[at:len(next)-ccEntry])
	binary.BigEndian.PutUint64(next[at:], uint64(exp))
	binary.BigEndian.PutUint64(next[at+8:], lease)
	count++
	d.Allowed = true
	d.Remaining = limit - int64(count)
	d.ResetAfter = core.Micros(ccExpiry(next, count-1) - now)
	return next, d.ResetAfter, d
}

// Release frees lease's slot. It returns a nil next (nothing to write) when
// lease is 0, is not held, or has already expired at now. When the last
// lease goes, next is the empty list, with a TTL of 1µs: it reads as fresh
// at once.
func (Concurrency) Release(state []byte, now int64, lease uint64, p *core.Policy) ([]byte, time.Duration) {
	now = bkClamp(now)
	if lease == 0 {
		return nil, 0
	}
	count, ok := ccDecode(state)
	if !ok {
		return nil, 0
	}
	lo := ccFirstLive(state, count, now)
	j := ccFind(state[lo*ccEntry:], count-lo, lease)
	if j < 0 {
		return nil, 0
	}
	next := ccRemove(state[:1+count*ccEntry], lo+j)
	count--
	next = next[:1+copy(next[1:], next[1+lo*ccEntry:])]
	count -= lo
	if count == 0 {
		return next, time.Microsecond
	}
	return next, core.Micros(ccExpiry(next, count-1) - now)
}

// Concurrency state, version 1: ccVersion, then one ccEntry per lease:
// expiry (µs, int64 big-endian) and id (uint64 big-endian), sorted by
// expiry. The high nibble of the version byte names the algorithm, so a key
// reused by another algorithm reads as absent.
const (
	ccVersion = 0x51
	ccEntry   = 8 + 8
)

var ccZero [ccEntry]byte

// ccDecode checks s and returns its number of leases; an undecodable s
// holds none. A list that is not sorted, or holds an expiry the step could
// not have written, is undecodable.
func ccDecode(s []byte) (count int, ok bool) {
	if len(s) < 1 || s[0] != ccVersion || (len(s)-1)%ccEntry != 0 {
		return 0, false
	}
	count = (len(s) - 1) / ccEntry
	if count > ConcurrencyMaxLimit {
		return 0, false
	}
	prev := int64(0)
	for i := range count {
		e := ccExpiry(s, i)
		if e < prev || !bkTimeOK(e) {
			return 0, false
		}
		prev = e
	}
	return count, true
}

func ccExpiry(s []byte, i int) int64 {
	return int64(binary.BigEndian.Uint64(s[1+i*ccEntry:]))
}

func ccID(s []byte, i int) uint64 {
	return binary.BigEndian.Uint64(s[1+i*ccEntry+8:])
}

// ccFirstLive is the index of the first lease that expires after now.
func ccFirstLive(s []byte, count int, now int64) int {
	i := 0
	for i < count && ccExpiry(s, i) <= now {
		i++
	}
	return i
}

// ccFind is the index of lease among the count leases of s, or -1.
func ccFind(s []byte, count int, lease uint64) int {
	for i := range count {
		if ccID(s, i) == lease {
			return i
		}
	}
	return -1
}

// ccRemove removes entry i from s, in place.
func ccRemove(s []byte, i int) []byte {
	at := 1 + i*ccEntry
	copy(s[at:], s[at+ccEntry:])
	return s[:len(s)-ccEntry]
}
