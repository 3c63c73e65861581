package memory

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// A full shard makes room for a new key by evicting the key that expires
// first, and counts the eviction; the other keys keep deciding.
func TestFullStoreEvictsTheKeyThatExpiresFirst(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 1, MaxKeys: 3})
	ttls := []time.Duration{2 * time.Minute, time.Minute, 3 * time.Minute}
	for i, ttl := range ttls {
		write(t, s, key(strconv.Itoa(i)), []byte{byte(i)}, ttl)
	}
	if n := s.Evictions(); n != 0 {
		t.Fatalf("Evictions = %d before the store was full, want 0", n)
	}

	write(t, s, key("new"), []byte{9}, time.Minute)
	if got := read(t, s, key("new")); !bytes.Equal(got, []byte{9}) {
		t.Errorf("new key in a full store: state %v, want [9]", got)
	}
	if got := read(t, s, key("1")); got != nil {
		t.Errorf("the key that expires first reads %v, want it evicted", got)
	}
	for _, i := range []int{0, 2} {
		if got := read(t, s, key(strconv.Itoa(i))); !bytes.Equal(got, []byte{byte(i)}) {
			t.Errorf("key %d: state %v, want [%d] kept", i, got, i)
		}
	}
	if n := s.Evictions(); n != 1 {
		t.Errorf("Evictions = %d, want 1", n)
	}
	if n := s.Len(); n != 3 {
		t.Errorf("Len = %d, want 3", n)
	}

	// Rewriting a key already held needs no room, and a read of a new key
	// (which writes nothing) takes none.
	write(t, s, key("0"), []byte{10}, time.Minute)
	read(t, s, key("absent"))
	if n := s.Evictions(); n != 1 {
		t.Errorf("Evictions = %d after updates that needed no room, want 1", n)
	}
}

func TestFullStoreReclaimsExpiredKeys(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 1, MaxKeys: 2})
	write(t, s, key("short"), []byte{1}, time.Second)
	write(t, s, key("long"), []byte{2}, time.Hour)
	clock.Advance(time.Second)
	write(t, s, key("new"), []byte{3}, time.Hour) // takes the expired key's place
	if got := read(t, s, key("long")); !bytes.Equal(got, []byte{2}) {
		t.Errorf("live key: state %v, want [2]", got)
	}
	if got := stored(s); got != 2 {
		t.Errorf("%d entries stored, want 2", got)
	}
	if n := s.Evictions(); n != 0 {
		t.Errorf("Evictions = %d, want 0: an expired key is reclaimed, not evicted", n)
	}
	// An expired key that is written again keeps its own place: no room is
	// needed for it.
	clock.Advance(time.Hour)
	write(t, s, key("long"), []byte{4}, time.Hour)
	write(t, s, key("new"), []byte{5}, time.Hour)
	if n := s.Evictions(); n != 0 {
		t.Errorf("Evictions = %d, want 0", n)
	}
}

// A flood of fresh identities evicts each other, not the key of a client
// that is being limited: a drained GCRA key expires last.
func TestFloodOfNewKeysNeverResetsAnActiveKey(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 1, MaxKeys: 100})
	l := newLimiter(t, s, algorithm.GCRA{}, core.PerMinute("api", 5), clock)
	ctx := context.Background()
	for range 5 {
		if d, err := l.Allow(ctx, "victim"); err != nil || !d.Allowed {
			t.Fatalf("victim's quota: %+v, %v", d, err)
		}
	}

	for i := range 10_000 {
		d, err := l.Allow(ctx, "flood-"+strconv.Itoa(i))
		if err != nil || !d.Allowed || d.Remaining != 4 {
			t.Fatalf("flood key %d: %+v, %v; want a fresh key admitted with 4 remaining", i, d, err)
		}
		if i%1000 == 999 {
			if d, err := l.Allow(ctx, "victim"); err != nil || d.Allowed || d.Remaining != 0 {
				t.Fatalf("victim after %d flood keys: %+v, %v; want denied with 0 remaining", i+1, d, err)
			}
		}
	}
	if n := s.Len(); n != 100 {
		t.Errorf("Len = %d, want 100 (MaxKeys)", n)
	}
	if n, want := s.Evictions(), uint64(10_000-99); n != want {
		t.Errorf("Evictions = %d, want %d", n, want)
	}

	// Once its debt is paid, the victim's key expires like any other.
	clock.Advance(time.Minute)
	if d, err := l.Allow(ctx, "victim"); err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("victim a minute later: %+v, %v; want allowed with 4 remaining", d, err)
	}
}

// MaxKeys is the bound of the whole store, however many shards share it.
func TestMaxKeysBoundsTheWholeStore(t *testing.T) {
	for _, maxKeys := range []int{1, 7, 1000} {
		s := newStore(t, &Options{SweepInterval: -1, MaxKeys: maxKeys})
		// 100 keys per slot fill every shard but with a vanishing chance;
		// from then on each new key evicts one.
		for i := range 100 * maxKeys {
			write(t, s, key(strconv.Itoa(i)), []byte{1}, time.Hour)
		}
		if n := s.Len(); n != maxKeys {
			t.Errorf("MaxKeys %d: Len %d after %d keys", maxKeys, n, 100*maxKeys)
		}
		if n, want := s.Evictions(), uint64(99*maxKeys); n != want {
			t.Errorf("MaxKeys %d: Evictions = %d, want %d", maxKeys, n, want)
		}
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		opts       *Options
		shards     int
		maxKeys    int
		sweep      time.Duration
		systemTime bool
	}{
		{nil, DefaultShards, DefaultMaxKeys, DefaultSweepInterval, true},
		{&Options{}, DefaultShards, DefaultMaxKeys, DefaultSweepInterval, true},
		{&Options{MaxKeys: -5, Shards: -1, Clock: core.SystemClock{}}, DefaultShards, DefaultMaxKeys, DefaultSweepInterval, true},
		{&Options{Shards: 100}, 128, DefaultMaxKeys, DefaultSweepInterval, true},
		{&Options{Shards: 1}, 1, DefaultMaxKeys, DefaultSweepInterval, true},
		{&Options{Shards: 1 << 30}, MaxShards / 2, DefaultMaxKeys, DefaultSweepInterval, true}, // 16 keys a shard at least
		{&Options{Shards: 1 << 30, MaxKeys: 1 << 20}, MaxShards, 1 << 20, DefaultSweepInterval, true},
		{&Options{MaxKeys: 10}, 1, 10, DefaultSweepInterval, true},
		{&Options{MaxKeys: 300}, 16, 300, DefaultSweepInterval, true},
		{&Options{MaxKeys: 1}, 1, 1, DefaultSweepInterval, true},
		{&Options{SweepInterval: -1, Clock: core.NewManualClock(epoch)}, DefaultShards, DefaultMaxKeys, -1, false},
	}
	for i, tt := range tests {
		c := tt.opts.config()
		if c.shards != tt.shards || c.maxKeys != tt.maxKeys || c.sweep != tt.sweep || (c.clock == nil) != tt.systemTime {
			t.Errorf("%d: config() = %+v; want %d shards, %d keys, sweep %v, system time %v", i, c, tt.shards, tt.maxKeys, tt.sweep, tt.systemTime)
		}
		s := New(tt.opts)
		total := 0
		for j := range s.shards {
			if s.shards[j].limit < 1 {
				t.Errorf("%d: shard %d holds %d keys at most", i, j, s.shards[j].limit)
			}
			total += s.shards[j].limit
		}
		if total != tt.maxKeys || len(s.shards) != tt.shards {
			t.Errorf("%d: %d shards holding %d keys, want %d holding %d", i, len(s.shards), total, tt.shards, tt.maxKeys)
		}
		s.Close()
	}
}

// A small MaxKeys keeps enough keys in each shard for its eviction to
// choose: with the default 256 shards, MaxKeys 300 gave most shards one
// key, which the next new key there evicted whatever it held, and a
// drained identity, evicted by a flood of fresh ones, was admitted again.
func TestSmallStoreEvictsTheFloodFirst(t *testing.T) {
	ctx := context.Background()
	for _, maxKeys := range []int{100, 300} {
		s := newStore(t, &Options{MaxKeys: maxKeys, SweepInterval: -1})
		l, err := core.New(core.Config{Policy: core.PerMinute("flood", 5), Algorithm: algorithm.GCRA{}, Store: s})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			l.Allow(ctx, "victim")
		}
		for i := range 20_000 {
			l.Allow(ctx, "fresh-"+strconv.Itoa(i))
			if i%50 == 0 {
				if d, _ := l.Allow(ctx, "victim"); d.Allowed {
					t.Fatalf("MaxKeys %d: the drained identity was admitted again after %d fresh ones", maxKeys, i+1)
				}
			}
		}
	}
}
