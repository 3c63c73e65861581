// Package inspect reads a backend's keys directly, beside a store, for the
// conformance suite's Inspector and TTLInspector: the stores' own
// harnesses and the sluice command's use it. It reads the key a network
// store writes for a store.Key (Key.String(), or memcache.Key).
package inspect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
	goredis "github.com/redis/go-redis/v9"
	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcache"
)

// Reader looks into one backend.
type Reader struct {
	// Exists reports whether the backend holds live state for key.
	Exists func(ctx context.Context, key store.Key) (bool, error)
	// TTL returns how much longer the backend keeps key's state, and
	// whether it holds any; a key with no expiry reads as math.MaxInt64.
	// Nil when the backend's TTLs cannot be read.
	TTL func(ctx context.Context, key store.Key) (time.Duration, bool, error)
}

// Redis reads through c.
func Redis(c goredis.UniversalClient) Reader {
	return Reader{
		Exists: func(ctx context.Context, key store.Key) (bool, error) {
			n, err := c.Exists(ctx, key.String()).Result()
			return n == 1, err
		},
		TTL: func(ctx context.Context, key store.Key) (time.Duration, bool, error) {
			d, err := c.PTTL(ctx, key.String()).Result() // -2 (ns): no key; -1: no expiry
			if err != nil || d < 0 {
				return pttl(int64(d), err)
			}
			return d, true, nil
		},
	}
}

// Valkey reads through c.
func Valkey(c valkeygo.Client) Reader {
	return Reader{
		Exists: func(ctx context.Context, key store.Key) (bool, error) {
			n, err := c.Do(ctx, c.B().Exists().Key(key.String()).Build()).AsInt64()
			return n == 1, err
		},
		TTL: func(ctx context.Context, key store.Key) (time.Duration, bool, error) {
			ms, err := c.Do(ctx, c.B().Pttl().Key(key.String()).Build()).AsInt64()
			if err != nil || ms < 0 {
				return pttl(ms, err)
			}
			return time.Duration(ms) * time.Millisecond, true, nil
		},
	}
}

// pttl reads a failed or negative PTTL: -2 is no key, -1 a key with no
// expiry.
func pttl(n int64, err error) (time.Duration, bool, error) {
	switch {
	case err != nil:
		return 0, false, err
	case n == -2:
		return 0, false, nil
	}
	return math.MaxInt64, true, nil
}

// Memcache reads through c, and TTLs from servers (nil: TTL is nil) with
// memcached's meta get ("mg <key> t"), which gomemcache does not send.
func Memcache(c *gomemcache.Client, servers []string) Reader {
	r := Reader{Exists: func(_ context.Context, key store.Key) (bool, error) {
		_, err := c.Get(memcache.Key(key))
		if errors.Is(err, gomemcache.ErrCacheMiss) {
			return false, nil
		}
		return err == nil, err
	}}
	if len(servers) > 0 {
		r.TTL = func(ctx context.Context, key store.Key) (time.Duration, bool, error) {
			return metaTTL(ctx, servers, memcache.Key(key))
		}
	}
	return r
}

// metaTTL asks each server for k's remaining lifetime: "HD t<seconds>"
// (t-1 for none), or "EN" for a miss.
func metaTTL(ctx context.Context, servers []string, k string) (time.Duration, bool, error) {
	for _, addr := range servers {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, false, err
		}
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = fmt.Fprintf(conn, "mg %s t\r\n", k)
		var line string
		if err == nil {
			line, err = bufio.NewReader(conn).ReadString('\n')
		}
		_ = conn.Close()
		if err != nil {
			return 0, false, err
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 1 && f[0] == "EN":
			continue
		case len(f) == 2 && f[0] == "HD" && strings.HasPrefix(f[1], "t"):
			secs, err := strconv.ParseInt(f[1][1:], 10, 64)
			switch {
			case err != nil:
				return 0, false, fmt.Errorf("inspect: meta get of %s: %q", addr, line)
			case secs < 0:
				return math.MaxInt64, true, nil
			}
			return time.Duration(secs) * time.Second, true, nil
		}
		return 0, false, fmt.Errorf("inspect: meta get of %s: %q", addr, line)
	}
	return 0, false, nil
}
