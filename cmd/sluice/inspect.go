package main

import (
	"context"
	"errors"
	"math"
	"time"

	gomemcache "github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/store"
	smemcache "github.com/sluicehq/sluice/store/memcache"
	sredis "github.com/sluicehq/sluice/store/redis"
	svalkey "github.com/sluicehq/sluice/store/valkey"
)

// inspector reads a backend's keys directly, through the client of the
// store the command opened first (never one the suite's instances use),
// so that conformance runs the checks that look into it: Expiry, and
// nothing written on bad input (conformance.Inspector), and LongTTL when
// it can read a key's TTL (conformance.TTLInspector; not on memcached,
// whose TTL gomemcache cannot read).
type inspector struct {
	exists func(ctx context.Context, key store.Key) (bool, error)
	ttl    func(ctx context.Context, key store.Key) (time.Duration, bool, error) // nil: cannot
}

// inspectorOf returns the inspector of s, a store storeurl opened, or nil
// for one the command cannot look into (memory).
func inspectorOf(s store.Store) *inspector {
	switch s := s.(type) {
	case *sredis.Store:
		c := s.Client()
		return &inspector{
			exists: func(ctx context.Context, key store.Key) (bool, error) {
				n, err := c.Exists(ctx, key.String()).Result()
				return n == 1, err
			},
			ttl: func(ctx context.Context, key store.Key) (time.Duration, bool, error) {
				d, err := c.PTTL(ctx, key.String()).Result()
				return pttl(d, err) // go-redis: -2 (ns) no key, -1 no expiry
			},
		}
	case *svalkey.Store:
		c := s.Client()
		return &inspector{
			exists: func(ctx context.Context, key store.Key) (bool, error) {
				n, err := c.Do(ctx, c.B().Exists().Key(key.String()).Build()).AsInt64()
				return n == 1, err
			},
			ttl: func(ctx context.Context, key store.Key) (time.Duration, bool, error) {
				ms, err := c.Do(ctx, c.B().Pttl().Key(key.String()).Build()).AsInt64()
				if ms < 0 {
					return pttl(time.Duration(ms), err)
				}
				return pttl(time.Duration(ms)*time.Millisecond, err)
			},
		}
	case *smemcache.Store:
		c := s.Client()
		return &inspector{exists: func(ctx context.Context, key store.Key) (bool, error) {
			_, err := c.Get(smemcache.Key(key))
			if errors.Is(err, gomemcache.ErrCacheMiss) {
				return false, nil
			}
			return err == nil, err
		}}
	}
	return nil
}

// pttl reads a PTTL: -2 is no key, -1 a key with no expiry.
func pttl(d time.Duration, err error) (time.Duration, bool, error) {
	switch {
	case err != nil:
		return 0, false, err
	case d == -2:
		return 0, false, nil
	case d < 0:
		return math.MaxInt64, true, nil
	}
	return d, true, nil
}

// harnessOf is cliHarness, an Inspector too when the backend has one, and
// a TTLInspector when that reads TTLs.
func harnessOf(h cliHarness) conformance.Harness {
	switch {
	case h.b.inspect == nil:
		return h
	case h.b.inspect.ttl == nil:
		return inspectingHarness{h}
	}
	return ttlHarness{inspectingHarness{h}}
}

type inspectingHarness struct{ cliHarness }

func (h inspectingHarness) Exists(ctx context.Context, key store.Key) (bool, error) {
	return h.b.inspect.exists(ctx, key)
}

type ttlHarness struct{ inspectingHarness }

func (h ttlHarness) TTL(ctx context.Context, key store.Key) (time.Duration, bool, error) {
	return h.b.inspect.ttl(ctx, key)
}

var (
	_ conformance.Inspector    = inspectingHarness{}
	_ conformance.TTLInspector = ttlHarness{}
)
