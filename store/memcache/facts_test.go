package memcache_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memcache"
)

// The tests in this file pin down what memcached itself does, as measured
// against the real server, and that the Store handles it.

// TestCASOnDeletedKeyIsConflict: memcached answers a cas on a key that was
// deleted (or expired, or evicted: see TestEviction) since the gets with
// NOT_FOUND, which gomemcache returns as ErrCacheMiss, not the ErrNotStored
// its doc promises. The Store must read that as a lost race: the next
// attempt sees the key absent and adds it.
func TestCASOnDeletedKeyIsConflict(t *testing.T) {
	addr := firstServer(t)
	c := newClient(t, addr)
	ctx := context.Background()

	// The server's answer, through gomemcache alone.
	raw := uniqueKey(t).String()
	if err := c.Set(&gomemcache.Item{Key: raw, Value: []byte("a"), Expiration: 60}); err != nil {
		t.Fatal(err)
	}
	it, err := c.Get(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(raw); err != nil {
		t.Fatal(err)
	}
	it.Value = []byte("b")
	if err := c.CompareAndSwap(it); !errors.Is(err, gomemcache.ErrCacheMiss) {
		t.Fatalf("cas after delete: got %v, want gomemcache.ErrCacheMiss (memcached's NOT_FOUND)", err)
	}

	// The Store's handling of it.
	s := memcache.New(c, nil)
	key := uniqueKey(t)
	if err := s.Update(ctx, key, put("one", time.Minute)); err != nil {
		t.Fatal(err)
	}
	k := memcache.Key(key)
	state, token, err := memcache.CAS(s).Load(ctx, k)
	if err != nil || string(state) != "one" || token == nil {
		t.Fatalf("Load = %q, %v, %v; want \"one\", a token, nil", state, token, err)
	}
	if err := c.Delete(k); err != nil {
		t.Fatal(err)
	}
	ok, err := memcache.CAS(s).Swap(ctx, k, token, []byte("two"), time.Minute)
	if ok || err != nil {
		t.Fatalf("Swap after delete = %v, %v; want false, nil (a conflict)", ok, err)
	}

	// Update retries into an add: Apply sees the key absent.
	if err := s.Update(ctx, key, put("one", time.Minute)); err != nil {
		t.Fatal(err)
	}
	var seen []string
	err = s.Update(ctx, key, mutationFunc(func(state []byte) ([]byte, time.Duration) {
		seen = append(seen, string(state))
		if len(seen) == 1 {
			// Another writer deletes the key between this gets and the cas.
			if err := c.Delete(k); err != nil {
				t.Error(err)
			}
		}
		return []byte("three"), time.Minute
	}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"one", ""}; fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("Apply saw %q, want %q", seen, want)
	}
	if got := getValue(t, c, k); got != "three" {
		t.Fatalf("stored %q, want \"three\"", got)
	}
	if st := s.Stats(); st.Attempts[2] != 1 || st.Conflicts != 2 || st.Errors != 0 {
		t.Fatalf("stats: %d updates of 2 attempts, %d conflicts, %d errors; want 1, 2, 0", st.Attempts[2], st.Conflicts, st.Errors)
	}
}

// TestConcurrentAddsOneWins: of many adds of one new key at once, memcached
// stores exactly one; the others answer NOT_STORED, which Swap reports as a
// conflict.
func TestConcurrentAddsOneWins(t *testing.T) {
	addr := firstServer(t)
	ctx := context.Background()
	for round := range 5 {
		k := memcache.Key(uniqueKey(t))
		const n = 32
		stores := make([]*memcache.Store, n)
		for i := range stores {
			stores[i] = newStore(t, nil, addr)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		won, lost := 0, 0
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				ok, err := memcache.CAS(stores[i]).Swap(ctx, k, nil, []byte(strconv.Itoa(i)), time.Minute)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("add %d: %v", i, err)
				case ok:
					won++
				default:
					lost++
				}
			})
		}
		close(start)
		wg.Wait()
		if won != 1 || lost != n-1 {
			t.Fatalf("round %d: %d adds won, %d lost; want 1 and %d", round, won, lost, n-1)
		}
	}
}

// TestLongExpirationIsAbsolute: memcached reads an expiration above 30 days
// as a Unix time, so a relative 30 days and 1 second is a date in 1970 and
// the item is gone at once. The Store sends such TTLs as absolute times, on
// the server's clock.
func TestLongExpirationIsAbsolute(t *testing.T) {
	addr := firstServer(t)
	c := newClient(t, addr)

	raw := uniqueKey(t).String()
	if err := c.Set(&gomemcache.Item{Key: raw, Value: []byte("x"), Expiration: memcache.MaxRelativeExpiration + 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(raw); !errors.Is(err, gomemcache.ErrCacheMiss) {
		t.Fatalf("get after set with a relative 30 days + 1 s: got %v, want a miss (memcached read it as 1970)", err)
	}

	// Servers: the absolute time is read from memcached's own clock.
	s := memcache.New(c, &memcache.Options{Servers: []string{addr}})
	for _, ttl := range []time.Duration{
		memcache.MaxRelativeExpiration*time.Second - 2*time.Second, // the longest TTL still sent relative
		memcache.MaxRelativeExpiration * time.Second,
		40 * 24 * time.Hour,
		core.MaxHorizon, // the longest a valid policy's bucket takes to drain
	} {
		key := uniqueKey(t)
		if err := s.Update(context.Background(), key, put("v", ttl)); err != nil {
			t.Fatal(err)
		}
		left, ok := remainingTTL(t, addr, memcache.Key(key))
		if !ok {
			t.Fatalf("ttl %s: the item is gone at once", ttl)
		}
		// The server counts down from what it was sent; allow it a few
		// seconds of its own progress, and the Store's hour of slack above.
		if min, max := ttl.Seconds()-5, ttl.Seconds()+3600+5; float64(left) < min || float64(left) > max {
			t.Fatalf("ttl %s: the server holds it %d s more, want %0.f to %0.f", ttl, left, min, max)
		}
	}
}

// TestShortTTLOutlivesItself: memcached's clock ticks once a second, so an
// item sent with expiration 1 can vanish a moment later. A TTL of d must
// keep the state at least d plus the Store's ClockSkew (an early vanish
// would reset a counter: over-admission), and must end (memcached reads 0
// as never).
func TestShortTTLOutlivesItself(t *testing.T) {
	addr := firstServer(t)
	c := newClient(t, addr)
	for _, skew := range []time.Duration{-1, 0} {
		opts := &memcache.Options{ClockSkew: skew}
		if skew == 0 {
			skew = memcache.DefaultClockSkew
		} else {
			skew = 0
		}
		s := newStore(t, opts, addr)
		for _, ttl := range []time.Duration{-time.Second, time.Nanosecond, 300 * time.Millisecond, time.Second} {
			t.Run(fmt.Sprintf("ttl=%v/skew=%v", ttl, skew), func(t *testing.T) {
				t.Parallel()
				key := uniqueKey(t)
				k := memcache.Key(key)
				life := max(ttl, 0) + skew
				left, ok := -1, false
				// Several writes, at different phases of the server's tick.
				for i := range 3 {
					time.Sleep(time.Duration(i) * 330 * time.Millisecond)
					sent := time.Now()
					if err := s.Update(context.Background(), key, put("v", ttl)); err != nil {
						t.Fatal(err)
					}
					if left, ok = remainingTTL(t, addr, k); !ok || left < 0 {
						t.Fatalf("after a write: found %v, %d s left; want an item that expires", ok, left)
					}
					// Until life has passed since the write began, the item
					// must still be there.
					for {
						_, err := c.Get(k)
						seen := time.Now()
						if seen.Sub(sent) >= life {
							break
						}
						if err != nil {
							t.Fatalf("gone (%v) %s after the write began, want at least %v", err, seen.Sub(sent), life)
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
				if max := int(life.Seconds()) + 3; left > max {
					t.Fatalf("held %d s, want at most %d", left, max)
				}
			})
		}
	}
}

// getValue reads k through gomemcache.
func getValue(t *testing.T, c *gomemcache.Client, k string) string {
	t.Helper()
	it, err := c.Get(k)
	if err != nil {
		t.Fatalf("get %s: %v", k, err)
	}
	return string(it.Value)
}

// remainingTTL asks memcached, with the meta command "mg <key> t", how many
// seconds k has left: -1 for never; ok false when k is absent.
func remainingTTL(t *testing.T, addr, k string) (left int, ok bool) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(conn, "mg %s t\r\n", k); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	line = strings.TrimSpace(line)
	if line == "EN" {
		return 0, false
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "HD" || !strings.HasPrefix(f[1], "t") {
		t.Fatalf("mg %s t: unexpected reply %q", k, line)
	}
	left, err = strconv.Atoi(f[1][1:])
	if err != nil {
		t.Fatalf("mg %s t: unexpected reply %q", k, line)
	}
	return left, true
}
