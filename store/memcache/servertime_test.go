package memcache_test

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memcache"
)

// behindClock reads the real clock minus a fixed lag: a process whose clock
// is wrong.
type behindClock time.Duration

func (c behindClock) Now() time.Time { return time.Now().Add(-time.Duration(c)) }

// TestLongTTLUsesServerClock: a state that must live longer than 30 days
// is sent with an absolute expiry, which memcached reads against its own
// clock. Taken from a process clock 31 days behind, that expiry lies in the
// past and every write vanishes at once: "2 per 30 days" admitted 10 of 10.
func TestLongTTLUsesServerClock(t *testing.T) {
	const lag = 31 * 24 * time.Hour
	p := core.Policy{Name: "monthly", Limit: 2, Window: 30 * 24 * time.Hour}
	for _, tc := range []struct {
		name string
		opts *memcache.Options
	}{
		{"servers", &memcache.Options{Clock: behindClock(lag), Servers: []string{firstServer(t)}}},
		{"no servers", &memcache.Options{Clock: behindClock(lag)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.opts, firstServer(t))
			l := newLimiter(t, s, algorithm.GCRA{}, p, behindClock(lag))
			id := uniqueKey(t).Identity
			admitted := 0
			for range 10 {
				d, err := l.Allow(t.Context(), id)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			if admitted != int(p.Limit) {
				t.Fatalf("OVER-ADMISSION: %d of 10 admitted under %d per %v, with the process clock %v behind", admitted, p.Limit, p.Window, lag)
			}
		})
	}
}

// metaTTL asks the memcached at addr for key's remaining TTL in seconds
// (meta get with the t flag), -1 when it never expires.
func metaTTL(t *testing.T, addr, key string) int64 {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(conn, "mg %s t\r\n", key)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var ttl int64
	if _, err := fmt.Sscanf(line, "HD t%d", &ttl); err != nil {
		t.Fatalf("mg %s t: %q", key, line)
	}
	return ttl
}

// TestLongTTLIsAbsoluteOnServerClock: a state that needs 60 days is written
// to expire 60 days (and the slack) after memcached's own now, whatever the
// process clock says; without Options.Servers it is written for 30 days.
func TestLongTTLIsAbsoluteOnServerClock(t *testing.T) {
	const day = 24 * time.Hour
	p := core.Policy{Name: "bimonthly", Limit: 1, Window: 30 * day, Burst: 2}
	for _, tc := range []struct {
		name     string
		servers  bool
		min, max time.Duration
	}{
		{"servers", true, 60 * day, 60*day + 2*time.Hour},
		{"no servers", false, 30*day - time.Minute, 30 * day},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := &memcache.Options{Clock: behindClock(31 * day)}
			if tc.servers {
				opts.Servers = []string{firstServer(t)}
			}
			s := newStore(t, opts, firstServer(t))
			l := newLimiter(t, s, algorithm.GCRA{}, p, behindClock(31*day))
			key := uniqueKey(t)
			key.Namespace = l.Key("").Namespace
			for range 2 {
				if d, err := l.Allow(t.Context(), key.Identity); err != nil || !d.Allowed {
					t.Fatalf("Allow = %+v, %v", d, err)
				}
			}
			ttl := time.Duration(metaTTL(t, firstServer(t), memcache.Key(key))) * time.Second
			if ttl < tc.min || ttl > tc.max {
				t.Fatalf("the state expires in %v, want %v to %v", ttl, tc.min, tc.max)
			}
		})
	}
}

// TestUnreachableClockServer: a server in Options.Servers that cannot be
// read costs no decision its deadline: long-lived states are then written
// for 30 days, and the limit still holds.
func TestUnreachableClockServer(t *testing.T) {
	p := core.Policy{Name: "monthly", Limit: 2, Window: 30 * 24 * time.Hour}
	s := newStore(t, &memcache.Options{Servers: []string{"127.0.0.1:1"}}, firstServer(t))
	l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.GCRA{}, Store: s, Prefix: "memcache-test", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	id := uniqueKey(t).Identity
	admitted := 0
	start := time.Now()
	for range 10 {
		d, err := l.Allow(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != int(p.Limit) {
		t.Fatalf("%d of 10 admitted under %d per %v", admitted, p.Limit, p.Window)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("10 decisions took %v with an unreachable clock server", el)
	}
}
