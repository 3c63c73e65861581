package memcache_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memcache"
)

// TestServerWithoutCAS: a memcached started with -C gives every item a CAS
// id of 0 and answers every cas with EXISTS, so no swap can ever win. The
// store says so at its first read of an item, as a store error (matching
// ErrUnavailable, not an unknown outcome), instead of retrying until the
// deadline or reporting contention, which sent an operator looking for a
// hot key.
func TestServerWithoutCAS(t *testing.T) {
	addr := startTinyMemcached(t, "-C")
	s := newStore(t, nil, addr)
	l := newLimiter(t, s, algorithm.GCRA{}, core.Policy{Name: "nocas", Limit: 5, Window: time.Minute}, nil)
	ctx := context.Background()
	if d, err := l.Allow(ctx, "id"); err != nil || !d.Allowed {
		t.Fatalf("first decision (an add): %+v %v", d, err)
	}
	start := time.Now()
	_, err := l.Allow(ctx, "id")
	if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrOutcomeUnknown) || errors.Is(err, core.ErrContention) {
		t.Fatalf("a decision on a server without CAS: %v; want a store error, neither contention nor an unknown outcome", err)
	}
	if !strings.Contains(err.Error(), "CAS") || !errors.Is(err, memcache.ErrNoCAS) {
		t.Errorf("the error does not name the cause: %v", err)
	}
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Errorf("the error took %v: it should come at the first read", took)
	}
}
