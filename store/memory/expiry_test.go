package memory

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

func TestExpiredKeyReadsAsAbsent(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1})
	k := key("alice")
	write(t, s, k, []byte{7}, 10*time.Second)

	clock.Advance(10*time.Second - time.Microsecond)
	if got := read(t, s, k); !bytes.Equal(got, []byte{7}) {
		t.Fatalf("1µs before expiry: state %v, want [7]", got)
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("1µs before expiry: Len %d, want 1", n)
	}
	clock.Advance(time.Microsecond)
	if got := read(t, s, k); got != nil {
		t.Fatalf("at expiry: state %v, want absent", got)
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("at expiry: Len %d, want 0", n)
	}

	// Writing an expired key starts it afresh, with the new TTL.
	write(t, s, k, []byte{8}, time.Second)
	clock.Advance(time.Second - time.Microsecond)
	if got := read(t, s, k); !bytes.Equal(got, []byte{8}) {
		t.Fatalf("rewritten key: state %v, want [8]", got)
	}
}

// timed is a Mutation that carries its decision's time, as a Limiter's does.
type timed struct {
	put
	now int64
}

func (m *timed) Now() int64 { return m.now }

// A mutation's own time decides expiry, whatever the store's clock says.
func TestExpiryFollowsTheDecisionsTime(t *testing.T) {
	s := newStore(t, &Options{Clock: core.NewManualClock(time.Unix(0, 0)), SweepInterval: -1})
	ctx := context.Background()
	k := key("alice")
	const t0 = 1_700_000_000_000_000 // µs
	if err := s.Update(ctx, k, &timed{put{next: []byte{1}, ttl: 10 * time.Second}, t0}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		now     int64
		present bool
	}{
		{t0 - 1_000_000_000, true}, // a clock that stepped back
		{t0 + 10_000_000 - 1, true},
		{t0 + 10_000_000, false},
	} {
		m := &timed{now: tt.now}
		if err := s.Update(ctx, k, m); err != nil {
			t.Fatal(err)
		}
		if got := len(m.saw) > 0; got != tt.present {
			t.Errorf("at %dµs after the write: present %v, want %v", tt.now-t0, got, tt.present)
		}
	}
	// The store's own clock, at the epoch, sees the key as live.
	if n := s.Len(); n != 1 {
		t.Errorf("Len on the store's clock = %d, want 1", n)
	}
}

func TestEachUpdateSetsTheTTL(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1})
	k := key("alice")
	write(t, s, k, []byte{1}, time.Minute)
	clock.Advance(30 * time.Second)
	write(t, s, k, []byte{2}, 5*time.Second) // a shorter TTL counts too
	clock.Advance(5 * time.Second)
	if got := read(t, s, k); got != nil {
		t.Fatalf("after the shorter TTL: state %v, want absent", got)
	}
	if n := s.Sweep(); n != 1 {
		t.Fatalf("Sweep removed %d, want 1: the shard's next expiry missed a shortened TTL", n)
	}

	// A nil next leaves the expiry alone: reading does not keep a key alive.
	write(t, s, k, []byte{3}, 10*time.Second)
	for range 4 {
		clock.Advance(3 * time.Second)
		read(t, s, k)
	}
	if got := read(t, s, k); got != nil {
		t.Fatalf("12s after a 10s TTL, kept alive by reads: state %v, want absent", got)
	}
}

func TestClockGoingBackwardsExpiresNothing(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1})
	write(t, s, key("a"), []byte{1}, time.Second)
	clock.Advance(-time.Hour)
	if got := read(t, s, key("a")); !bytes.Equal(got, []byte{1}) {
		t.Fatalf("after the clock stepped back: state %v, want [1]", got)
	}
	if n := s.Sweep(); n != 0 {
		t.Fatalf("Sweep removed %d, want 0", n)
	}
}

func TestHugeTTLNeverExpires(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1})
	write(t, s, key("a"), []byte{1}, time.Duration(math.MaxInt64))
	clock.Advance(100 * 365 * 24 * time.Hour)
	if got := read(t, s, key("a")); !bytes.Equal(got, []byte{1}) {
		t.Fatalf("state %v, want [1]: now+ttl must saturate, not wrap", got)
	}
}

func TestSweepDeletesOnlyExpiredKeys(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 4})
	const n = 1000
	for i := range n {
		ttl := time.Duration(i%10+1) * time.Second // 100 keys per TTL of 1..10s
		write(t, s, key(strconv.Itoa(i)), []byte{byte(i)}, ttl)
	}
	if got := s.Sweep(); got != 0 {
		t.Fatalf("Sweep before anything expired removed %d, want 0", got)
	}
	clock.Advance(3 * time.Second)
	if got := s.Sweep(); got != 300 {
		t.Fatalf("Sweep at 3s removed %d, want 300", got)
	}
	if got, want := stored(s), n-300; got != want {
		t.Fatalf("%d entries stored after the sweep, want %d", got, want)
	}
	if got := s.Len(); got != n-300 {
		t.Fatalf("Len %d, want %d", got, n-300)
	}
	clock.Advance(7 * time.Second)
	if got := s.Sweep(); got != 700 {
		t.Fatalf("Sweep at 10s removed %d, want 700", got)
	}
	if got := stored(s); got != 0 {
		t.Fatalf("%d entries stored, want 0", got)
	}
}

// The background sweeper deletes expired keys by itself. Its ticker runs on
// real time (1ms here) while expiry follows the injected clock.
func TestSweeperDeletesExpiredKeys(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: time.Millisecond})
	for i := range 100 {
		write(t, s, key(strconv.Itoa(i)), []byte{1}, time.Second)
	}
	write(t, s, key("live"), []byte{2}, time.Hour)
	clock.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for stored(s) > 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := stored(s); n != 1 {
		t.Fatalf("%d entries stored 10s after they expired, want 1: the sweeper did not run", n)
	}
	if got := read(t, s, key("live")); !bytes.Equal(got, []byte{2}) {
		t.Fatalf("live key: state %v, want [2]", got)
	}
}

// Without a sweeper nothing is deleted behind the caller's back, but expired
// keys still read as absent.
func TestNoSweeper(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1})
	if s.stop != nil {
		t.Fatal("a sweeper was started with a negative SweepInterval")
	}
	write(t, s, key("a"), []byte{1}, time.Second)
	clock.Advance(time.Second)
	if got := read(t, s, key("a")); got != nil {
		t.Fatalf("state %v, want absent", got)
	}
	if n := stored(s); n != 1 {
		t.Fatalf("%d entries stored, want the expired one still there", n)
	}
}

// A sweep that leaves a shard's table mostly empty shrinks it, so that the
// memory a flood of keys took comes back; every live key stays.
func TestSweepShrinksAfterAFlood(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 1})
	const flood = 4096
	for i := range flood {
		write(t, s, key(strconv.Itoa(i)), []byte{1}, time.Second)
	}
	write(t, s, key("live"), []byte{2}, time.Hour)
	sh := &s.shards[0]
	if n := len(sh.t.slots); n < flood {
		t.Fatalf("%d slots for %d keys", n, flood+1)
	}
	clock.Advance(time.Second)
	if n := s.Sweep(); n != flood {
		t.Fatalf("Sweep removed %d, want %d", n, flood)
	}
	if n := len(sh.t.slots); n != minSlots {
		t.Fatalf("%d slots left for one key, want %d", n, minSlots)
	}
	if got := read(t, s, key("live")); !bytes.Equal(got, []byte{2}) {
		t.Fatalf("live key after the shrink: state %v, want [2]", got)
	}
	if err := s.Delete(context.Background(), key("live")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	s.Sweep()
	if sh.t.slots != nil || sh.t.count != 0 {
		t.Fatalf("empty table after the last sweep: %d slots, %d keys; want none", len(sh.t.slots), sh.t.count)
	}
}

// A TTL that is not a whole number of microseconds is rounded up: a key
// never expires before its TTL is over.
func TestTTLRoundsUpToAMicrosecond(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1})
	write(t, s, key("a"), []byte{1}, time.Nanosecond)
	if got := read(t, s, key("a")); !bytes.Equal(got, []byte{1}) {
		t.Fatalf("state %v right after a 1ns TTL, want [1]", got)
	}
	clock.Advance(time.Microsecond)
	if got := read(t, s, key("a")); got != nil {
		t.Fatalf("state %v 1µs after a 1ns TTL, want absent", got)
	}
}
