package memory

import (
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
