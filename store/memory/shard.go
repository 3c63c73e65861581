package memory

import (
	"math"
	"sync"
	"unsafe"
)

type shardData struct {
	mu     sync.Mutex
	t      table
	closed bool
	limit  int // the most keys t may hold
	// next is a lower bound on every expiry in t (math.MaxInt64 when t is
	// empty): before it, no key can have expired and a sweep would find
	// nothing. An update lowers it; only a sweep raises it, to the exact
	// minimum.
	next int64
	// evictions counts the live keys evicted to make room (Evictions).
	evictions uint64
	// scratch is where a step writes the state of a new key: the slot
	// copies it in, so the step need not allocate one. Used under mu.
	scratch [inlineCap]byte
}

// shard is padded to a cache line so that two shards' locks never share one.
type shard struct {
	shardData
	_ [64 - unsafe.Sizeof(shardData{})%64]byte
}

func (sh *shard) init(limit int) {
	sh.limit = limit
	sh.next = math.MaxInt64
}

// makeRoom prepares sh for a new key at now, in bounded work: it reclaims
// expired slots from the table's hand (reclaimSteps of them; none while no
// key can have expired), and, when the shard still holds its limit, evicts
// the key that expires first among a few (table.evict), counting it when
// it was live. So a full shard never refuses a key. The caller holds sh.mu.
func (sh *shard) makeRoom(now int64) {
	if now >= sh.next {
		sh.t.reclaim(now, reclaimSteps)
	}
	if sh.t.count >= sh.limit {
		if sh.t.evict() > now {
			sh.evictions++
		}
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
	sh.next = next
	return removed
}
