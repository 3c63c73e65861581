package memcache_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcache"
)

// harness gives the conformance suite Stores over real memcached: one
// server, or a pool of both test servers.
type harness struct {
	addrs []string
	// inspect is a client of the harness's own, for Exists.
	inspect *gomemcache.Client
}

func newHarness(t testing.TB, pool bool) *harness {
	addrs := testenv.MemcacheAddrs(t)
	if !pool {
		addrs = addrs[:1]
	}
	return &harness{addrs: addrs, inspect: newClient(t, addrs...)}
}

// NewStore returns a Store over a client of its own: a separate instance.
// Servers lets the Store read memcached's clock for TTLs past 30 days.
func (h *harness) NewStore(t testing.TB) store.Store {
	return newStore(t, &memcache.Options{Servers: h.addrs}, h.addrs...)
}

// Capabilities: every algorithm, no scripts; each Limiter's clock decides,
// so the fleet's clock skew is declared (see the package doc for what it
// costs each algorithm).
func (h *harness) Capabilities() conformance.Capabilities {
	return conformance.Capabilities{ClockSkew: time.Second}
}

// Exists reads the key the Store would use for key.
func (h *harness) Exists(_ context.Context, key store.Key) (bool, error) {
	_, err := h.inspect.Get(memcache.Key(key))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, gomemcache.ErrCacheMiss):
		return false, nil
	}
	return false, err
}

// TTL asks each server for the key's remaining lifetime with memcached's
// meta get ("mg <key> t": "HD t<seconds>", t-1 for none; "EN" for a miss),
// which gomemcache does not send (conformance.TTLInspector).
func (h *harness) TTL(ctx context.Context, key store.Key) (time.Duration, bool, error) {
	k := memcache.Key(key)
	for _, addr := range h.addrs {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, false, err
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = fmt.Fprintf(c, "mg %s t\r\n", k)
		var line string
		if err == nil {
			line, err = bufio.NewReader(c).ReadString('\n')
		}
		_ = c.Close()
		if err != nil {
			return 0, false, err
		}
		switch f := strings.Fields(line); {
		case len(f) == 1 && f[0] == "EN":
			continue
		case len(f) == 2 && f[0] == "HD" && strings.HasPrefix(f[1], "t"):
			secs, err := strconv.ParseInt(f[1][1:], 10, 64)
			switch {
			case err != nil:
				return 0, false, fmt.Errorf("mg: %q", line)
			case secs < 0:
				return math.MaxInt64, true, nil
			}
			return time.Duration(secs) * time.Second, true, nil
		default:
			return 0, false, fmt.Errorf("mg: %q", line)
		}
	}
	return 0, false, nil
}

var (
	_ conformance.Inspector    = (*harness)(nil)
	_ conformance.TTLInspector = (*harness)(nil)
)

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool bool
	}{{"single", false}, {"pool", true}} {
		t.Run(tc.name, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) conformance.Harness { return newHarness(t, tc.pool) })
		})
	}
}
