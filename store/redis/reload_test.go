package redis

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestClusterMapReloadedAfterANodeFails: a cluster whose slot map names a
// node that is gone (a master killed, its replica promoted) is read again
// after a call fails on it, so that the next calls go to the node the
// cluster now names. go-redis reloads its map when it follows a redirect
// or retries, both of which the store turns off, and otherwise once a
// minute (ClusterStateReloadInterval): every call on a failed master's
// slots failed for about a minute after its replica had taken over. Here
// the map (ClusterSlots) names a port nothing listens on, then the real
// server.
func TestClusterMapReloadedAfterANodeFails(t *testing.T) {
	var addr atomic.Pointer[string]
	dead := "127.0.0.1:1"
	addr.Store(&dead)
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]goredis.ClusterSlot, error) {
			return []goredis.ClusterSlot{{Start: 0, End: 16383, Nodes: []goredis.ClusterNode{{Addr: *addr.Load()}}}}, nil
		},
	})
	t.Cleanup(func() { c.Close() })
	s := New(c, nil)
	t.Cleanup(func() { s.Close() })
	l, err := core.New(core.Config{Policy: core.PerMinute("reload", 100), Algorithm: algorithm.GCRA{}, Store: s, Prefix: "sluice-test-reload"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Allow(ctx, "id"); err == nil {
		t.Fatal("a call to a node that is gone succeeded")
	}
	live := testenv.RedisAddr(t)
	addr.Store(&live)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := l.Allow(ctx, "id")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls still fail 5 s after the cluster named a live node: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = l.Reset(ctx, "id")
}

// A client the store makes for a node outside the slot map marks its
// dials as the cluster's own nodes' are: a dial that failed (here through
// a Dialer of the user's, whose error is no net.OpError) sent nothing, and
// is no unknown outcome.
func TestStrayNodeDialErrorIsNotSent(t *testing.T) {
	refuse := errors.New("no route to the node")
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:  []string{"127.0.0.1:1"},
		Dialer: func(context.Context, string, string) (net.Conn, error) { return nil, refuse },
	})
	t.Cleanup(func() { c.Close() })
	s := New(c, nil)
	t.Cleanup(func() { s.Close() })
	n, err := s.stray("127.0.0.1:2")
	if err != nil {
		t.Fatal(err)
	}
	err = n.Process(context.Background(), goredis.NewStatusCmd(context.Background(), "ping"))
	if !errors.Is(err, refuse) {
		t.Fatalf("ping through the stray client: %v, want the dialer's error", err)
	}
	if got := storeError("script", err); errors.Is(got, core.ErrOutcomeUnknown) {
		t.Fatalf("a failed dial of a stray node reads as %v: an unknown outcome", got)
	}
}
