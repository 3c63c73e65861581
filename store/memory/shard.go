package memory

import (
	"math"
	"sync"
	"unsafe"
)

// shardData is one shard: its lock and, on the lock's cache line, the fields
// every decision reads (front, next, closed), then the table.
type shardData struct {
	mu sync.Mutex
	// front is a slot of its own, outside the table, on the cache line of
	// the lock: a new key takes it when it is free (empty, or its key has
	// expired), and keeps it while it lives. A hot key so sits beside the
	// lock, and a decision on it moves one cache line between the cores
	// that contend for it, not two; and a new key that finds it free costs
	// no insert. A key is in front or in t, never both.
	front slot
	// next is a lower bound on every expiry in the shard (math.MaxInt64
	// when it holds nothing): before it, no key can have expired and a
	// sweep would find nothing. An update lowers it; only a sweep raises
	// it, to the exact minimum.
	next   int64
	closed bool
	t      table
	limit  int // the most keys the shard may hold, front and t together
	// evictions counts the live keys evicted to make room (Evictions).
	evictions uint64
	// scratch is where a step writes the state of a new key: the slot
	// copies it in, so the step need not allocate one. Used under mu.
	scratch [inlineCap]byte
}

// shard is padded to whole cache lines, so that two shards' locks never
// share one and the lock's line holds the fields a decision reads.
type shard struct {
	shardData
	_ [64 - unsafe.Sizeof(shardData{})%64]byte
	// peek, on a line of its own that only a change of the front key
	// writes, is what a refusal of that key is decided from without mu.
	peek peekSlot
}

var _ [64 - unsafe.Offsetof(shardData{}.closed)]byte // mu, front, next and closed share a line

func (sh *shard) init(limit int) {
	sh.limit = limit
	sh.next = math.MaxInt64
}

// keys is how many keys sh holds, expired or not.
func (sh *shard) keys() int {
	if sh.front.used() {
		return sh.t.count + 1
	}
	return sh.t.count
}

// find returns k's slot, in front or in the table, or nil.
func (sh *shard) find(k slotKey) *slot {
	if f := &sh.front; f.used() && f.is(k) {
		return f
	}
	return sh.t.find(k)
}

// remove deletes k, if present.
func (sh *shard) remove(k slotKey) {
	if f := &sh.front; f.used() && f.is(k) {
		sh.dropFront()
		return
	}
	sh.t.remove(k)
}

// dropFront empties the front slot.
func (sh *shard) dropFront() {
	sh.peek.withdraw()
	if f := &sh.front; f.meta&slotLong != 0 {
		sh.t.dropLong(f.key())
	}
	sh.front = slot{}
}

// place returns an empty slot for k, which is absent, at now: the front
// slot when it is free (its expired key, if any, is dropped), else one of
// the table's. Either way it first makes room in bounded work: it reclaims
// expired slots from the table's hand (reclaimSteps of them; none while the
// table is empty or no key can have expired, so a stream of keys that each
// find the front free costs no table work, and a table they left behind
// still empties), and, when the shard still holds its limit, evicts the key
// that expires first among a few (table.evict; the front's key only when
// the table holds none), counting it when it was live. So a full shard
// never refuses a key. No slot pointer taken before survives it. The caller
// holds sh.mu.
func (sh *shard) place(k slotKey, now int64) *slot {
	f := &sh.front
	if f.used() && now >= f.expires {
		sh.dropFront()
	}
	if sh.t.count > 0 && now >= sh.next {
		sh.t.reclaim(now, reclaimSteps)
	}
	if sh.keys() >= sh.limit {
		sh.evict(now)
	}
	if !f.used() {
		f.hi, f.lo, f.meta = k.hi, k.lo, slotUsed
		return f
	}
	return sh.t.insert(k)
}

// evict deletes one key of a shard that holds at least one, to make room.
func (sh *shard) evict(now int64) {
	var expires int64
	if sh.t.count > 0 {
		expires = sh.t.evict()
	} else {
		expires = sh.front.expires
		sh.dropFront()
	}
	if expires > now {
		sh.evictions++
	}
}

// sweep deletes the expired keys of sh and returns how many it deleted. The
// caller holds sh.mu. It costs O(1) while no key can have expired, and a
// pass over the shard's table otherwise.
func (sh *shard) sweep(now int64) int {
	if now < sh.next {
		return 0
	}
	removed, next := sh.t.sweep(now)
	if f := &sh.front; f.used() {
		if now >= f.expires {
			sh.dropFront()
			removed++
		} else {
			next = min(next, f.expires)
		}
	}
	sh.next = next
	return removed
}

// live counts the keys of sh that have not expired at now.
func (sh *shard) live(now int64) int {
	n := 0
	if f := &sh.front; f.used() && now < f.expires {
		n++
	}
	for j := range sh.t.slots {
		if sl := &sh.t.slots[j]; sl.used() && now < sl.expires {
			n++
		}
	}
	return n
}
