package main

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/internal/inspect"
	"github.com/sluicehq/sluice/store"
	smemcache "github.com/sluicehq/sluice/store/memcache"
	sredis "github.com/sluicehq/sluice/store/redis"
	svalkey "github.com/sluicehq/sluice/store/valkey"
)

// inspectorOf returns a reader of the backend of s, a store storeurl
// opened, through the store's own client, or nil for one the command
// cannot look into (memory). With it, conformance runs the checks that
// look into the backend: Expiry, and nothing written on bad input
// (conformance.Inspector), and LongTTL when it reads TTLs
// (conformance.TTLInspector; not on memcached, whose servers the store
// does not name).
func inspectorOf(s store.Store) *inspect.Reader {
	var r inspect.Reader
	switch s := s.(type) {
	case *sredis.Store:
		r = inspect.Redis(s.Client())
	case *svalkey.Store:
		r = inspect.Valkey(s.Client())
	case *smemcache.Store:
		r = inspect.Memcache(s.Client(), nil)
	default:
		return nil
	}
	return &r
}

// harnessOf is cliHarness, an Inspector too when the backend has one, and
// a TTLInspector when that reads TTLs.
func harnessOf(h cliHarness) conformance.Harness {
	switch {
	case h.b.inspect == nil:
		return h
	case h.b.inspect.TTL == nil:
		return inspectingHarness{h}
	}
	return ttlHarness{inspectingHarness{h}}
}

type inspectingHarness struct{ cliHarness }

func (h inspectingHarness) Exists(ctx context.Context, key store.Key) (bool, error) {
	return h.b.inspect.Exists(ctx, key)
}

type ttlHarness struct{ inspectingHarness }

func (h ttlHarness) TTL(ctx context.Context, key store.Key) (time.Duration, bool, error) {
	return h.b.inspect.TTL(ctx, key)
}

var (
	_ conformance.Inspector    = inspectingHarness{}
	_ conformance.TTLInspector = ttlHarness{}
)
