package memory

import "unsafe"

// table is one shard's hash table: open addressing with linear probing over
// a power-of-two array of 64-byte slots, keyed by mapKey, with each key's
// state held inside its slot when it fits (every rate algorithm's does).
// A decision on an existing key so touches one cache line and allocates
// nothing, where a Go map of pointers would chase three (the map's group,
// the entry, the state) and leave two heap objects per key for the garbage
// collector to trace. The keys are already uniform random bits (a seeded
// hash), so the table uses them as they are, without hashing them again.
//
// Deletion shifts the following run of slots back (no tombstones), so a
// lookup always ends at the first empty slot; the load is kept at most 3/4,
// so there is always one.
type table struct {
	slots []slot // nil until the first insert
	mask  uint64
	count int
	// hand is the next slot that reclaim and evict look at: a clock hand
	// that goes round the table, so that their work per insert is bounded
	// and, over time, every slot is looked at.
	hand uint64
}

const (
	// reclaimSteps is how many slots each insert of a new key looks at
	// (from the hand), deleting the expired ones among them. With the load
	// at most 3/4, expired keys then take at most about a third as many
	// entries as live ones in a stream of short-lived keys, at the cost of
	// a few sequential cache lines per new key.
	reclaimSteps = 8
	// evictSamples is how many used slots evict compares, as Redis's
	// approximated LRU samples five keys: the key that expires first among
	// them makes room.
	evictSamples = 5
	// evictProbes bounds the slots evict looks at to find its samples; it
	// looks further only until it has found one key.
	evictProbes = 4 * evictSamples
)

// inlineCap is the longest state a slot holds in place.
const inlineCap = 31

// slot is one key's place: 64 bytes, one cache line.
type slot struct {
	key     mapKey
	expires int64   // µs; the state reads as absent from then on
	heap    *[]byte // the state, when it is longer than inlineCap
	meta    uint8   // slotUsed | the length of the inline state
	inline  [inlineCap]byte
}

const slotUsed = 0x80

var _ [64 - unsafe.Sizeof(slot{})]byte // a slot must fit a cache line

const minSlots = 8

func (s *slot) used() bool { return s.meta&slotUsed != 0 }

// state returns the key's own state. An inline state is handed out with the
// slot's whole capacity, so a step may grow it in place up to inlineCap.
func (s *slot) state() []byte {
	if s.heap != nil {
		return *s.heap
	}
	return s.inline[:s.meta&^slotUsed]
}

// setState keeps next, which may share the array state() returned.
func (s *slot) setState(next []byte) {
	if len(next) <= inlineCap {
		if len(next) > 0 && &next[0] != &s.inline[0] {
			copy(s.inline[:], next) // a memmove: next may overlap inline
		}
		s.heap = nil
		s.meta = slotUsed | uint8(len(next))
		return
	}
	if s.heap == nil {
		s.heap = new([]byte)
	}
	*s.heap = next
	s.meta = slotUsed
}

// lookup returns the index of k's slot and true, or, when k is absent, the
// index of the empty slot where it would go and false. The table must have
// slots.
func (t *table) lookup(k mapKey) (uint64, bool) {
	for i := k.h1 & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		if !s.used() {
			return i, false
		}
		if s.key == k {
			return i, true
		}
	}
}

// find returns k's slot, or nil.
func (t *table) find(k mapKey) *slot {
	if t.slots == nil {
		return nil
	}
	if i, ok := t.lookup(k); ok {
		return &t.slots[i]
	}
	return nil
}

// insert adds k, which must be absent, and returns its empty slot. It may
// move every slot (growing the table), so no slot pointer survives it.
func (t *table) insert(k mapKey) *slot {
	if (t.count+1)*4 > len(t.slots)*3 {
		t.resize(max(minSlots, 2*len(t.slots)))
	}
	i, _ := t.lookup(k)
	s := &t.slots[i]
	s.key, s.meta = k, slotUsed
	t.count++
	return s
}

// remove deletes k, if present.
func (t *table) remove(k mapKey) {
	if t.slots == nil {
		return
	}
	if i, ok := t.lookup(k); ok {
		t.deleteAt(i)
	}
}

// deleteAt empties slot i and shifts back the slots after it that may move
// closer to their home, so that no lookup stops short at the hole. It moves
// slots only forward of i (wrapping at the end).
func (t *table) deleteAt(i uint64) {
	for j := (i + 1) & t.mask; ; j = (j + 1) & t.mask {
		s := &t.slots[j]
		if !s.used() {
			break
		}
		// s may fill the hole if the hole lies between its home and j.
		home := s.key.h1 & t.mask
		if (j-home)&t.mask >= (j-i)&t.mask {
			t.slots[i] = *s
			i = j
		}
	}
	t.slots[i] = slot{}
	t.count--
}

// resize moves every key into a new array of n slots (a power of two).
func (t *table) resize(n int) {
	old := t.slots
	t.slots, t.mask, t.hand = make([]slot, n), uint64(n-1), 0
	for i := range old {
		if s := &old[i]; s.used() {
			j, _ := t.lookup(s.key)
			t.slots[j] = *s
		}
	}
}

// reclaim looks at up to steps slots from the hand and deletes the ones
// expired at now, then shrinks a table left mostly empty (see shrink). It
// returns how many it deleted. Its cost is bounded by steps, whatever the
// table holds.
func (t *table) reclaim(now int64, steps int) int {
	if t.slots == nil {
		return 0
	}
	removed := 0
	for range steps {
		i := t.hand & t.mask
		if s := &t.slots[i]; s.used() && now >= s.expires {
			t.deleteAt(i)
			removed++
			continue // a later slot may have moved into i: look at it next
		}
		t.hand = (i + 1) & t.mask
	}
	if removed > 0 {
		t.shrink()
	}
	return removed
}

// evict deletes one key to make room, the one that expires first among up
// to evictSamples used slots from the hand, and returns its expiry. The
// table must hold a key. It looks at evictProbes slots at most, unless it
// has found fewer than two keys (one, in a table of one) among them.
func (t *table) evict() int64 {
	var victim uint64
	best, found := int64(0), 0
	i := t.hand & t.mask
	// At least two candidates when the table holds two keys: with one, a
	// sparse stretch of the table could make the key that expires last
	// (a client being limited) the victim, resetting its limit.
	least := min(2, t.count)
	for probes := 0; found < evictSamples && (probes < evictProbes || found < least) && probes < len(t.slots); probes++ {
		if s := &t.slots[i]; s.used() {
			if found == 0 || s.expires < best {
				victim, best = i, s.expires
			}
			found++
		}
		i = (i + 1) & t.mask
	}
	t.hand = i
	t.deleteAt(victim)
	return best
}

// shrink halves a table below 1/8 load until it is at most half full (an
// empty one is dropped), so that the memory a flood of keys took comes back.
// Growth at 3/4 and shrinking at 1/8 leave at least n/4 inserts or n/8
// deletions between two resizes of n slots, so both cost O(1) per change,
// amortized.
func (t *table) shrink() {
	switch {
	case t.count == 0:
		t.slots, t.mask, t.hand = nil, 0, 0
	case len(t.slots) > minSlots && t.count*8 < len(t.slots):
		n := minSlots
		for n < 2*t.count {
			n *= 2
		}
		t.resize(n)
	}
}

// sweep deletes every slot expired at now and returns how many it deleted
// and the earliest expiry left (MaxInt64 when none), then shrinks a table
// left mostly empty (see shrink).
func (t *table) sweep(now int64) (removed int, next int64) {
	next = 1<<63 - 1
	for i := uint64(0); i < uint64(len(t.slots)); {
		s := &t.slots[i]
		if s.used() && now >= s.expires {
			t.deleteAt(i)
			removed++
			continue // a later slot may have moved into i
		}
		if s.used() && s.expires < next {
			next = s.expires
		}
		i++
	}
	t.shrink()
	return removed, next
}
