package memcache_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memcache"
)

// startTinyMemcached starts a memcached of the test's own on a free loopback
// port with the least memory it accepts (1 MB, with items capped at half of
// it), so that a little junk evicts the limiter's keys, with extra options
// added to its command line. It is killed when the test ends.
//
// With "-o no_lru_maintainer" its LRU is the classic one: memcached's
// default segmented LRU keeps a key read twice in its warm segment, out of
// reach of a flood of junk that is never read, until its background thread
// gets round to moving it, so whether a flood evicts a given key comes down
// to that thread's timing. The classic LRU evicts it once the flood has
// passed it, but under concurrent writes it answers some of them "out of
// memory" instead of evicting. The store's behaviour on an evicted key is
// the same under either.
func startTinyMemcached(t *testing.T, extra ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the test starts a server of its own")
	}
	bin, err := exec.LookPath("memcached")
	if err != nil {
		if os.Getenv("SLUICE_REQUIRE_SERVERS") != "" || os.Getenv("CI") != "" {
			t.Fatalf("memcached is not installed (make deps installs it): %v", err)
		}
		t.Skipf("memcached is not installed: %v", err)
	}
	for try := 0; try < 5; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		args := []string{"-l", "127.0.0.1", "-p", strconv.Itoa(port), "-U", "0", "-m", "1", "-I", "512k"}
		args = append(args, extra...)
		if os.Geteuid() == 0 {
			args = append(args, "-u", "nobody") // memcached refuses to run as root
		}
		cmd := exec.Command(bin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		for range 100 {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Cleanup(func() {
					cmd.Process.Kill()
					<-exited
				})
				return addr
			}
			select {
			case <-exited:
			case <-time.After(50 * time.Millisecond):
				continue
			}
			break
		}
		cmd.Process.Kill()
		<-exited
		t.Logf("memcached on port %d did not start: %s", port, stderr.String())
	}
	t.Fatal("could not start a memcached of the test's own")
	return ""
}

// junk writes items with keys and values as long as a limiter's, so that
// they land in the same slab class (and LRU) as its state: memcached evicts
// within a class.
type junk struct {
	w              *bufio.Writer
	keyLen, valLen int
	next           int
}

func newJunk(t *testing.T, addr string, keyLen, valLen int) *junk {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &junk{w: bufio.NewWriter(c), keyLen: keyLen, valLen: valLen}
}

// write sends n sets without waiting for replies (noreply).
func (j *junk) write(n int) error {
	val := strings.Repeat("j", j.valLen)
	for range n {
		j.next++
		fmt.Fprintf(j.w, "set %0*d 0 0 %d noreply\r\n%s\r\n", j.keyLen, j.next, j.valLen, val)
	}
	return j.w.Flush()
}

// command is a connection to memcached for one text command, which must be
// answered within 2 s.
func command(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	return c
}

// stored reports whether memcached holds key, without moving it up its
// LRU (a meta get with the u flag): a get between rounds of junk would
// mark the key active, and memcached's segmented LRU keeps rescuing an
// active key from the tail.
func stored(t *testing.T, addr, key string) bool {
	t.Helper()
	c := command(t, addr)
	defer c.Close()
	fmt.Fprintf(c, "mg %s u\r\n", key)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case strings.HasPrefix(line, "HD"):
		return true
	case strings.HasPrefix(line, "EN"):
		return false
	}
	t.Fatalf("mg %s u: %q", key, line)
	return false
}

// evictions reads memcached's count of evicted items.
func evictions(t *testing.T, addr string) int {
	t.Helper()
	c := command(t, addr)
	defer c.Close()
	fmt.Fprint(c, "stats\r\n")
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "END") {
			t.Fatal("stats: no evictions line")
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "STAT evictions "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
}

// TestEviction runs on a memcached of its own with 1 MB of memory, filled
// with junk of the limiter's size class.
func TestEviction(t *testing.T) {
	// One server for the subtests that wait for a given key to be evicted,
	// one with the default LRU for the one that decides under eviction.
	addr := startTinyMemcached(t, "-o", "no_lru_maintainer")
	ctx := context.Background()

	// A cas on an evicted item is answered NOT_FOUND (gomemcache's
	// ErrCacheMiss): the Store reads it as a conflict, and the next attempt
	// adds the key afresh.
	t.Run("CASAfterEviction", func(t *testing.T) {
		c := newClient(t, addr)
		s := memcache.New(c, nil)
		key := uniqueKey(t)
		k := memcache.Key(key)
		if err := s.Update(ctx, key, put("0123456789abc", time.Hour)); err != nil {
			t.Fatal(err)
		}
		_, token, err := memcache.CAS(s).Load(ctx, k)
		if err != nil || token == nil {
			t.Fatalf("Load: %v, %v", token, err)
		}
		raw := *token.(*gomemcache.Item)
		j := newJunk(t, addr, len(k), len(raw.Value))
		// Each round writes ten times what the server holds, so that the
		// key, read only between rounds (a read moves it up memcached's
		// LRU), reaches the tail.
		for evicted := false; !evicted; {
			if j.next >= 1_000_000 {
				t.Fatal("a million junk items did not evict the key")
			}
			if err := j.write(100_000); err != nil {
				t.Fatal(err)
			}
			evicted = !stored(t, addr, k)
		}
		if err := c.CompareAndSwap(&raw); !errors.Is(err, gomemcache.ErrCacheMiss) {
			t.Fatalf("cas after eviction: got %v, want gomemcache.ErrCacheMiss (memcached's NOT_FOUND)", err)
		}
		if ok, err := memcache.CAS(s).Swap(ctx, k, token, []byte("x"), time.Hour); ok || err != nil {
			t.Fatalf("Swap after eviction = %v, %v; want false, nil (a conflict)", ok, err)
		}
		var seen []byte
		err = s.Update(ctx, key, mutationFunc(func(state []byte) ([]byte, time.Duration) {
			seen = state
			return []byte("fresh"), time.Hour
		}))
		if err != nil || seen != nil {
			t.Fatalf("Update after eviction: %v, Apply saw %q; want nil and an absent key", err, seen)
		}
	})

	// What eviction costs a limit: an evicted state reads as fresh, so the
	// key's whole quota is admitted again, once per eviction, and no more.
	t.Run("EvictionResetsCounter", func(t *testing.T) {
		c := newClient(t, addr)
		s := memcache.New(c, nil)
		clock := core.NewManualClock(time.Date(2026, 3, 14, 15, 20, 0, 0, time.UTC))
		p := core.Policy{Name: "evict", Limit: 5, Window: time.Hour}
		l := newLimiter(t, s, algorithm.GCRA{}, p, clock)
		id := uniqueKey(t).Identity
		k := memcache.Key(l.Key(id))
		allowed := func() int {
			n := 0
			for range 2 * p.Limit {
				d, err := l.Allow(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					n++
				}
			}
			return n
		}
		if n := allowed(); n != int(p.Limit) {
			t.Fatalf("fresh key: %d admitted, want %d", n, p.Limit)
		}
		it, err := c.Get(k)
		if err != nil {
			t.Fatal(err)
		}
		j := newJunk(t, addr, len(k), len(it.Value))
		for {
			if j.next >= 1_000_000 {
				t.Fatal("a million junk items did not evict the key")
			}
			if err := j.write(100_000); err != nil {
				t.Fatal(err)
			}
			if !stored(t, addr, k) {
				break
			}
		}
		n := allowed()
		t.Logf("after an eviction, at the same instant: %d more admitted (quota %d)", n, p.Limit)
		if n > int(p.Limit) {
			t.Fatalf("after an eviction: %d admitted, more than one quota (%d)", n, p.Limit)
		}
	})

	// A fleet keeps deciding, with no error, while junk evicts its keys.
	t.Run("DecidingUnderEviction", func(t *testing.T) {
		p := core.Policy{Name: "evict", Limit: 100, Window: time.Second, Burst: 10}
		addr := startTinyMemcached(t)
		stores := []*memcache.Store{newStore(t, nil, addr), newStore(t, nil, addr)}
		limiters := []*core.Limiter{
			newLimiter(t, stores[0], algorithm.GCRA{}, p, nil),
			newLimiter(t, stores[1], algorithm.GCRA{}, p, nil),
		}
		before := evictions(t, addr)
		var decided, failed atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		// GCRA's state is 9 bytes.
		j := newJunk(t, addr, len(memcache.Key(limiters[0].Key("hot-0"))), 9)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := j.write(2000); err != nil {
					t.Errorf("junk: %v", err)
					return
				}
			}
		})
		deadline := time.Now().Add(time.Second)
		for g := range 8 {
			wg.Go(func() {
				for i := 0; time.Now().Before(deadline); i++ {
					// Two hot identities and a stream of cold ones.
					id := fmt.Sprintf("hot-%d", g%2)
					if i%2 == 1 {
						id = fmt.Sprintf("cold-%d-%d", g, i)
					}
					_, err := limiters[g%2].Allow(ctx, id)
					if err != nil {
						if failed.Add(1) == 1 {
							t.Errorf("Allow(%s): %v", id, err)
						}
						continue
					}
					decided.Add(1)
				}
			})
		}
		time.Sleep(time.Until(deadline))
		close(stop)
		wg.Wait()
		evicted := evictions(t, addr) - before
		st := mergeStats(stores[0].Stats(), stores[1].Stats())
		t.Logf("%d decisions, %d errors, %d items evicted meanwhile; attempts per update: %s",
			decided.Load(), failed.Load(), evicted, histogram(st.Attempts))
		if evicted == 0 {
			t.Fatal("nothing was evicted: the test proves nothing")
		}
		if failed.Load() > 0 {
			t.Errorf("%d calls failed", failed.Load())
		}
	})
}
