package memory

import (
	"math/bits"
	"unsafe"
)

// table is one shard's hash table: open addressing with linear probing over
// an array of 40-byte slots of any length, keyed by slotKey, with each key's
// state held inside its slot when it fits (every O(1) algorithm's does).
// A decision on an existing key so touches one slot and allocates nothing,
// where a Go map of pointers would chase three (the map's group, the entry,
// the state) and leave two heap objects per key for the garbage collector to
// trace. A slot holds no pointer, so the collector never scans the array.
// The keys are already uniform random bits (a seeded hash), so the table
// maps them onto its slots as they are (see home), without hashing them
// again.
//
// Deletion shifts the following run of slots back (no tombstones), so a
// lookup always ends at the first empty slot; the load is kept at most 3/4,
// so there is always one. The table grows by half when an insert would pass
// 3/4, so growth leaves it at least half full: with 40-byte slots a key
// takes 53 to 80 bytes.
type table struct {
	slots []slot // nil until the first insert
	count int
	// hand is the next slot that reclaim and evict look at: a clock hand
	// that goes round the table, so that their work per insert is bounded
	// and, over time, every slot is looked at.
	hand int
	// long holds the states longer than inlineCap (a sliding log, many
	// leases), by key: the slot of such a key carries slotLong. Nil until
	// the first one. longPeak is the most it has held since it was made
	// (see compactLong).
	long     map[slotKey][]byte
	longPeak int
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

// inlineCap is the longest state a slot holds in place: GCRA's, the token
// bucket's and the leaky bucket's take 9 bytes, a fixed window's 13, a
// sliding counter's 17.
const inlineCap = 19

// slotKey is the part of a mapKey a slot keeps: h1, which also picks the
// slot, and the high half of h0, whose low bits picked the shard (so they are
// the same for every key in it). 96 bits, all of them independent of where
// the key is stored, tell keys apart.
type slotKey struct {
	hi uint64 // mapKey.h1
	lo uint32 // mapKey.h0 >> 32
}

func (k mapKey) slot() slotKey { return slotKey{k.h1, uint32(k.h0 >> 32)} }

// slot is one key's place: 40 bytes and no pointer.
type slot struct {
	hi      uint64
	expires int64 // µs; the state reads as absent from then on
	lo      uint32
	meta    uint8 // slotUsed | slotLong | the length of the inline state
	inline  [inlineCap]byte
}

const (
	slotUsed = 0x80
	slotLong = 0x40 // the state is in table.long
	lenMask  = 0x1f
)

var _ [40 - unsafe.Sizeof(slot{})]byte // a slot takes 40 bytes
var _ [unsafe.Sizeof(slot{}) - 40]byte

var _ [lenMask - inlineCap]byte // meta's length bits hold inlineCap

const minSlots = 8

func (s *slot) used() bool        { return s.meta&slotUsed != 0 }
func (s *slot) key() slotKey      { return slotKey{s.hi, s.lo} }
func (s *slot) is(k slotKey) bool { return s.hi == k.hi && s.lo == k.lo }

// home is the slot where a key whose hi is h starts its probe: h scaled onto
// the table's length (the high word of h·n), so that a table may have any
// length, not only a power of two.
func (t *table) home(h uint64) int {
	i, _ := bits.Mul64(h, uint64(len(t.slots)))
	return int(i)
}

// next is the slot after i, round the end of the table.
func (t *table) next(i int) int {
	if i++; i == len(t.slots) {
		return 0
	}
	return i
}

// state returns the key's own state. An inline state is handed out with the
// slot's whole capacity, so a step may grow it in place up to inlineCap.
func (t *table) state(s *slot) []byte {
	if s.meta&slotLong != 0 {
		return t.long[s.key()]
	}
	return s.inline[: s.meta&lenMask : inlineCap]
}

// setState keeps next as s's state; next may share the array state(s)
// returned.
func (t *table) setState(s *slot, next []byte) {
	if len(next) <= inlineCap {
		if len(next) > 0 && &next[0] != &s.inline[0] {
			copy(s.inline[:], next) // a memmove: next may overlap inline
		}
		if s.meta&slotLong != 0 {
			t.dropLong(s.key())
		}
		s.meta = slotUsed | uint8(len(next))
		return
	}
	if t.long == nil {
		t.long = make(map[slotKey][]byte)
	}
	t.long[s.key()] = next
	t.longPeak = max(t.longPeak, len(t.long))
	s.meta = slotUsed | slotLong
}

// dropLong deletes k's long state, and rebuilds the side map once it
// holds less than an eighth of the most it held (past minSlots of them):
// a Go map never gives back the memory of entries deleted from it, so a
// flood of sliding-log keys would otherwise keep theirs after every one
// had expired, and keys whose states shrink back into their slots (leases
// released) theirs while they live on. Each rebuild follows at least 7/8
// of its peak's deletions, so its copies cost O(1) per deletion,
// amortized. It keeps an empty map, so that a key whose state goes back
// and forth allocates none.
func (t *table) dropLong(k slotKey) {
	delete(t.long, k)
	if n := len(t.long); t.longPeak > minSlots && n*8 < t.longPeak {
		t.rebuildLong()
	}
}

// compactLong drops the side map once it is empty (every deletion went
// through dropLong, which keeps it from being sparse): the sweep and the
// reclaim of expired keys, not each decision, then bound how often a
// shard's map comes and goes.
func (t *table) compactLong() {
	if t.long != nil && len(t.long) == 0 {
		t.long, t.longPeak = nil, 0
	}
}

// rebuildLong copies the side map into one sized for what it holds.
func (t *table) rebuildLong() {
	long := make(map[slotKey][]byte, len(t.long))
	for k, v := range t.long {
		long[k] = v
	}
	t.long, t.longPeak = long, len(long)
}

// lookup returns the index of k's slot and true, or, when k is absent, the
// index of the empty slot where it would go and false. The table must have
// slots.
func (t *table) lookup(k slotKey) (int, bool) {
	for i := t.home(k.hi); ; i = t.next(i) {
		s := &t.slots[i]
		if !s.used() {
			return i, false
		}
		if s.is(k) {
			return i, true
		}
	}
}

// find returns k's slot, or nil.
func (t *table) find(k slotKey) *slot {
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
func (t *table) insert(k slotKey) *slot {
	if (t.count+1)*4 > len(t.slots)*3 {
		t.resize(max(minSlots, len(t.slots)+len(t.slots)/2))
	}
	i, _ := t.lookup(k)
	s := &t.slots[i]
	s.hi, s.lo, s.meta = k.hi, k.lo, slotUsed
	t.count++
	return s
}

// remove deletes k, if present.
func (t *table) remove(k slotKey) {
	if t.slots == nil {
		return
	}
	if i, ok := t.lookup(k); ok {
		t.deleteAt(i)
	}
}

// deleteAt empties slot i and shifts back the slots after it that may move
// closer to their home, so that no lookup stops short at the hole. It moves
// slots only forward of i (round the end).
func (t *table) deleteAt(i int) {
	if s := &t.slots[i]; s.meta&slotLong != 0 {
		t.dropLong(s.key())
	}
	n := len(t.slots)
	for j := t.next(i); ; j = t.next(j) {
		s := &t.slots[j]
		if !s.used() {
			break
		}
		// s may fill the hole if the hole lies between its home and j:
		// if j is at least as far from s's home as from the hole.
		if ahead(t.home(s.hi), j, n) >= ahead(i, j, n) {
			t.slots[i] = *s
			i = j
		}
	}
	t.slots[i] = slot{}
	t.count--
}

// ahead is how many slots j lies after i, round the end of a table of n.
func ahead(i, j, n int) int {
	if d := j - i; d >= 0 {
		return d
	}
	return j - i + n
}

// resize moves every key into a new array of n slots.
func (t *table) resize(n int) {
	old := t.slots
	t.slots, t.hand = make([]slot, n), 0
	for i := range old {
		if s := &old[i]; s.used() {
			j, _ := t.lookup(s.key())
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
		i := t.hand
		if s := &t.slots[i]; s.used() && now >= s.expires {
			t.deleteAt(i)
			removed++
			continue // a later slot may have moved into i: look at it next
		}
		t.hand = t.next(i)
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
	var victim int
	best, found := int64(0), 0
	i := t.hand
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
		i = t.next(i)
	}
	t.hand = i
	t.deleteAt(victim)
	return best
}

// shrink resizes a table below 1/8 load to twice its keys (at least
// minSlots), so that the memory a flood of keys took comes back. It never
// drops the array: a shard whose keys all expire between two decisions (a
// limit of a billion an hour lets a key live 3.6 µs) would otherwise
// allocate a table on every new key. Only a sweep drops an empty table
// (see sweep). Growth at 3/4 and shrinking at 1/8 leave at least n/4
// inserts or 3n/8 deletions between two resizes of n slots, so both cost
// O(1) per change, amortized.
func (t *table) shrink() {
	if len(t.slots) > minSlots && t.count*8 < len(t.slots) {
		t.resize(max(minSlots, 2*t.count))
	}
	t.compactLong()
}

// sweep deletes every slot expired at now and returns how many it deleted
// and the earliest expiry left (MaxInt64 when none), then shrinks a table
// left mostly empty (see shrink) and drops one left empty: the sweeper's
// period, not each decision, then bounds how often an idle shard's table
// comes and goes.
func (t *table) sweep(now int64) (removed int, next int64) {
	next = 1<<63 - 1
	for i := 0; i < len(t.slots); {
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
	if t.count == 0 {
		t.slots, t.hand = nil, 0 // long may still hold the front slot's state
		t.compactLong()
		return removed, next
	}
	t.shrink()
	return removed, next
}
