package memory

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// frontKey reports whether key k of s sits in its shard's front slot.
func frontKey(s *Store, name string) bool {
	k := s.keys.hash(key(name))
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.front.used() && sh.front.is(k.slot())
}

// The front slot takes a new key when it is free, keeps it while it lives,
// and passes to the next new key once it has expired; every key reads back
// the same whether it sits in front or in the table.
func TestFrontSlot(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 1})
	write(t, s, key("a"), []byte{1}, time.Second)
	write(t, s, key("b"), []byte{2}, time.Hour)
	if !frontKey(s, "a") || frontKey(s, "b") {
		t.Fatalf("a in front %v, b in front %v; want a, the first key, alone there", frontKey(s, "a"), frontKey(s, "b"))
	}
	if got := read(t, s, key("a")); !bytes.Equal(got, []byte{1}) {
		t.Fatalf("a reads %v, want [1]", got)
	}
	if got := read(t, s, key("b")); !bytes.Equal(got, []byte{2}) {
		t.Fatalf("b reads %v, want [2]", got)
	}
	write(t, s, key("a"), []byte{3}, time.Second) // rewritten where it is
	if !frontKey(s, "a") || stored(s) != 2 {
		t.Fatalf("a in front %v, %d keys stored; want a still in front, 2 keys", frontKey(s, "a"), stored(s))
	}

	clock.Advance(time.Second) // a has expired: the next new key takes its place
	write(t, s, key("c"), []byte{4}, time.Second)
	if !frontKey(s, "c") || stored(s) != 2 {
		t.Fatalf("c in front %v, %d keys stored; want c in front and a gone", frontKey(s, "c"), stored(s))
	}
	if got := read(t, s, key("a")); got != nil {
		t.Fatalf("a reads %v after it expired, want absent", got)
	}

	if err := s.Delete(context.Background(), key("c")); err != nil {
		t.Fatal(err)
	}
	if frontKey(s, "c") || read(t, s, key("c")) != nil || s.Len() != 1 {
		t.Fatalf("after Delete: c in front %v, Len %d; want c gone, b left", frontKey(s, "c"), s.Len())
	}
}

// A sweep deletes an expired front key and counts it, and lowers no bound
// below a live one's expiry; a long state in front survives a sweep that
// empties the table (the table's side map holds it).
func TestSweepAndTheFrontSlot(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 1})
	long := bytes.Repeat([]byte{9}, inlineCap+5)
	write(t, s, key("long"), long, time.Hour)
	write(t, s, key("short"), []byte{1}, time.Second)
	if !frontKey(s, "long") {
		t.Fatal("the first key is not in front")
	}
	clock.Advance(time.Second)
	if n := s.Sweep(); n != 1 {
		t.Fatalf("Sweep removed %d, want 1", n)
	}
	if got := read(t, s, key("long")); !bytes.Equal(got, long) {
		t.Fatalf("long state after the sweep: %v, want %v", got, long)
	}
	clock.Advance(time.Hour)
	if n := s.Sweep(); n != 1 || stored(s) != 0 {
		t.Fatalf("Sweep removed %d, %d left; want the front key gone", n, stored(s))
	}
	if sh := &s.shards[0]; len(sh.t.long) != 0 {
		t.Fatalf("%d long states held after their key went", len(sh.t.long))
	}
}

// A shard of one key holds it in front; a new key evicts it, counted when
// it was live.
func TestFrontSlotInAShardOfOne(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, MaxKeys: 1})
	write(t, s, key("a"), []byte{1}, time.Hour)
	write(t, s, key("b"), []byte{2}, time.Hour)
	if stored(s) != 1 || !frontKey(s, "b") || s.Evictions() != 1 {
		t.Fatalf("%d keys stored, b in front %v, %d evictions; want b alone, 1 eviction", stored(s), frontKey(s, "b"), s.Evictions())
	}
	if got := read(t, s, key("a")); got != nil {
		t.Fatalf("evicted a reads %v, want absent", got)
	}
}
