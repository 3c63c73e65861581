package memory

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

func TestFullStoreRefusesNewKeysOnly(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 1, MaxKeys: 3})
	ctx := context.Background()
	for i := range 3 {
		write(t, s, key(strconv.Itoa(i)), []byte{byte(i)}, time.Minute)
	}

	m := &put{next: []byte{9}, ttl: time.Minute}
	err := s.Update(ctx, key("new"), m)
	if !errors.Is(err, ErrFull) || !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("new key in a full store: %v, want ErrFull matching core.ErrUnavailable", err)
	}
	if got := read(t, s, key("new")); got != nil {
		t.Errorf("refused key reads %v, want absent", got)
	}

	// Existing keys keep deciding; a new key that writes nothing (the read
	// above) needs no room.
	for i := range 3 {
		write(t, s, key(strconv.Itoa(i)), []byte{byte(10 + i)}, time.Minute)
		if got := read(t, s, key(strconv.Itoa(i))); !bytes.Equal(got, []byte{byte(10 + i)}) {
			t.Errorf("key %d in a full store: state %v, want [%d]", i, got, 10+i)
		}
	}
	if n := s.Len(); n != 3 {
		t.Errorf("Len = %d, want 3", n)
	}

	// Deleting a key makes room.
	if err := s.Delete(ctx, key("0")); err != nil {
		t.Fatal(err)
	}
	write(t, s, key("new"), []byte{9}, time.Minute)
}

func TestFullStoreReclaimsExpiredKeys(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, Shards: 1, MaxKeys: 2})
	write(t, s, key("short"), []byte{1}, time.Second)
	write(t, s, key("long"), []byte{2}, time.Hour)
	if err := s.Update(context.Background(), key("new"), &put{next: []byte{3}, ttl: time.Hour}); !errors.Is(err, ErrFull) {
		t.Fatalf("before expiry: %v, want ErrFull", err)
	}
	clock.Advance(time.Second)
	write(t, s, key("new"), []byte{3}, time.Hour) // takes the expired key's place
	if got := read(t, s, key("long")); !bytes.Equal(got, []byte{2}) {
		t.Errorf("live key: state %v, want [2]", got)
	}
	if got := stored(s); got != 2 {
		t.Errorf("%d entries stored, want 2", got)
	}
	// An expired key that is written again keeps its own place: no room is
	// needed for it.
	clock.Advance(time.Hour)
	write(t, s, key("long"), []byte{4}, time.Hour)
	write(t, s, key("new"), []byte{5}, time.Hour)
}

// The reason a full store refuses instead of evicting: a flood of fresh
// identities must never reset the counter of a key that is being limited.
func TestFloodOfNewKeysNeverResetsAnActiveKey(t *testing.T) {
	clock := core.NewManualClock(epoch)
	s := newStore(t, &Options{Clock: clock, SweepInterval: -1, MaxKeys: 100})
	l := newLimiter(t, s, counter{}, core.PerMinute("api", 5), clock)
	ctx := context.Background()
	for range 5 {
		if d, err := l.Allow(ctx, "victim"); err != nil || !d.Allowed {
			t.Fatalf("victim's quota: %+v, %v", d, err)
		}
	}

	refused := 0
	for i := range 10_000 {
		d, err := l.Allow(ctx, "flood-"+strconv.Itoa(i))
		switch {
		case errors.Is(err, ErrFull) && errors.Is(err, core.ErrUnavailable):
			refused++
		case err != nil:
			t.Fatalf("flood key %d: unexpected error %v", i, err)
		case !d.Allowed:
			t.Fatalf("flood key %d: a fresh key was denied: %+v", i, d)
		}
		if i%1000 == 999 {
			s.Sweep() // nothing has expired: a sweep must not make room
			if d, err := l.Allow(ctx, "victim"); err != nil || d.Allowed || d.Remaining != 0 {
				t.Fatalf("victim after %d flood keys: %+v, %v; want denied with 0 remaining", i+1, d, err)
			}
		}
	}
	if n := s.Len(); n != 100 {
		t.Errorf("Len = %d, want 100 (MaxKeys)", n)
	}
	if refused != 10_000-99 {
		t.Errorf("%d flood keys refused, want %d", refused, 10_000-99)
	}

	// Once the window is over, the victim's key expires like any other.
	clock.Advance(time.Minute)
	if d, err := l.Allow(ctx, "victim"); err != nil || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("victim in the next window: %+v, %v; want allowed with 4 remaining", d, err)
	}
}

// The failure policy, not the store, decides what a refused key gets.
func TestFullStoreUnderFailOpen(t *testing.T) {
	s := newStore(t, &Options{SweepInterval: -1, Shards: 1, MaxKeys: 1})
	l, err := core.New(core.Config{Policy: core.PerMinute("api", 5), Algorithm: counter{}, Store: s, Failure: core.FailOpen})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := l.Allow(ctx, "a"); err != nil || !d.Allowed || d.Degraded {
		t.Fatalf("first key: %+v, %v", d, err)
	}
	if d, err := l.Allow(ctx, "b"); err != nil || !d.Allowed || !d.Degraded {
		t.Fatalf("key refused by a full store under FailOpen: %+v, %v; want a degraded admission", d, err)
	}
}

// MaxKeys is the bound of the whole store, however many shards share it.
func TestMaxKeysBoundsTheWholeStore(t *testing.T) {
	for _, maxKeys := range []int{1, 7, 1000} {
		s := newStore(t, &Options{SweepInterval: -1, MaxKeys: maxKeys})
		admitted := 0
		for i := range 100 * maxKeys {
			err := s.Update(context.Background(), key(strconv.Itoa(i)), &put{next: []byte{1}, ttl: time.Hour})
			switch {
			case err == nil:
				admitted++
			case !errors.Is(err, ErrFull):
				t.Fatalf("MaxKeys %d: %v", maxKeys, err)
			}
		}
		// 100 keys per slot fill every shard but with a vanishing chance.
		if admitted != maxKeys || s.Len() != maxKeys {
			t.Errorf("MaxKeys %d: %d keys admitted, Len %d; want %d", maxKeys, admitted, s.Len(), maxKeys)
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
		{&Options{Shards: 1 << 30}, MaxShards, DefaultMaxKeys, DefaultSweepInterval, true},
		{&Options{MaxKeys: 10}, 8, 10, DefaultSweepInterval, true},
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
