package memory

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// slotsHeld is the number of slots the store's tables hold, used or not:
// what its memory follows (40 bytes a slot).
func slotsHeld(s *Store) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.t.slots)
		sh.mu.Unlock()
	}
	return n
}

// A stream of short-lived identities at the default MaxKeys and with no
// sweeper: the expired keys are reclaimed as new ones arrive, so the tables
// follow the live keys, not the million the store could hold.
func TestMemoryFollowsLiveKeys(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 4})
	const (
		perSecond = 50_000
		ttl       = 20 * time.Millisecond // 1,000 live keys at a time
		live      = perSecond * int(ttl) / int(time.Second)
		seconds   = 4
	)
	for i := range perSecond * seconds {
		write(t, s, key(strconv.Itoa(i)), []byte{1}, ttl)
		clock.Advance(time.Second / perSecond)
		if i%10_000 == 9_999 {
			if n := stored(s); n > 3*live {
				t.Fatalf("after %d keys: %d entries stored for %d live keys; want at most %d", i+1, n, live, 3*live)
			}
			if n := slotsHeld(s); n > 16*live {
				t.Fatalf("after %d keys: %d slots held for %d live keys; want at most %d", i+1, n, live, 16*live)
			}
		}
	}

	// The stream stops; a trickle of new keys reclaims the rest, and the
	// tables shrink back.
	clock.Advance(time.Second)
	for i := range 4 * live {
		write(t, s, key("trickle-"+strconv.Itoa(i)), []byte{1}, time.Millisecond)
		clock.Advance(time.Millisecond)
	}
	if n := stored(s); n > 64 {
		t.Errorf("after the trickle: %d entries stored, want at most 64", n)
	}
	if n := slotsHeld(s); n > 4*64 {
		t.Errorf("after the trickle: %d slots held, want at most %d", n, 4*64)
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// longStates writes n keys with states too long for a slot, living ttl, to
// a store of its own, and returns the live heap before and after.
func longStates(t *testing.T, n int, ttl time.Duration) (clock *core.ManualClock, s *Store, before, full uint64) {
	clock = core.NewManualClock(epoch)
	s = newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 4})
	long := bytes.Repeat([]byte{7}, inlineCap+1)
	before = heapInUse()
	for i := range n {
		write(t, s, key(strconv.Itoa(i)), long, ttl)
	}
	return clock, s, before, heapInUse()
}

// A flood of keys whose states are too long for a slot (a sliding log of
// a few entries) gives its memory back once the keys expire, as keys with
// inline states do: Go's maps never shrink, so the side map that held
// their states (6.3 MB after 100,000 sliding-log keys had expired and
// been swept, for no live key) must be rebuilt as it empties.
func TestLongStatesMemoryFollowsLiveKeys(t *testing.T) {
	const n = 100_000
	clock, s, before, full := longStates(t, n, time.Minute)
	long := bytes.Repeat([]byte{7}, inlineCap+1)
	clock.Advance(time.Hour)
	// A few live keys, written after the others expired, stay.
	for i := range 100 {
		write(t, s, key("live-"+strconv.Itoa(i)), long, time.Hour)
	}
	s.Sweep()
	after := heapInUse()
	if stored(s) != 100 {
		t.Fatalf("%d keys stored after the sweep, want the 100 live ones", stored(s))
	}
	if held := int64(after) - int64(before); held > int64(full-before)/20 {
		t.Errorf("%d keys took %d bytes; %d bytes still held for 100 live keys", n, full-before, held)
	}
}

// Keys whose states shrink back into their slots (a concurrency limit's
// leases released) give back the side map's memory while they live on:
// neither a sweep nor a reclaim comes before they expire.
func TestLongStatesShrinkingGiveMemoryBack(t *testing.T) {
	const n = 100_000
	_, s, before, full := longStates(t, n, time.Hour)
	for i := range n {
		write(t, s, key(strconv.Itoa(i)), []byte{1}, time.Hour)
	}
	after := heapInUse()
	inline := int64(after) - int64(before)
	if stored(s) != n {
		t.Fatalf("%d keys stored, want %d", stored(s), n)
	}
	// What is left is the slots' (about 80 bytes a key at most), not the
	// long states' map.
	if inline > 100*n {
		t.Errorf("%d keys with long states took %d bytes; with their states back in their slots they hold %d (over 100 a key)", n, full-before, inline)
	}
}
