package sluicegrpc_test

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	sluicegrpc "github.com/sluicehq/sluice/adapters/grpc"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// redisFleet serves one policy of the given limit from two gRPC servers,
// each with its own Redis client and limiter, sharing the real
// redis-server's counters under a fresh prefix.
func redisFleet(t *testing.T, alg core.Algorithm, pol core.Policy) [2]testpb.TestServiceClient {
	t.Helper()
	addr := testenv.RedisAddr(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "grpc-" + hex.EncodeToString(b[:])
	var fleet [2]testpb.TestServiceClient
	for i := range fleet {
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		st := redis.New(c, nil)
		t.Cleanup(func() {
			_ = st.Close()
			_ = c.Close()
		})
		// A generous deadline: a cold connection on a loaded machine is
		// slow, and a call that times out is Unavailable, not a count.
		lim := newLimiter(t, core.Config{Policy: pol, Algorithm: alg, Store: st, Prefix: prefix, Timeout: 5 * time.Second})
		fleet[i] = servePolicy(t, &service{}, sluicegrpc.MustPolicy(sluicegrpc.Config{Layers: []sluicegrpc.Layer{{Limiter: lim}}}))
	}
	return fleet
}

// Against a real redis-server, two servers share one limit: exactly the
// quota of unary calls is admitted across both, and a refusal carries the
// wait the server's script computed.
func TestRedisFleetUnary(t *testing.T) {
	fleet := redisFleet(t, algorithm.GCRA{}, core.Policy{Name: "api", Limit: 3, Window: time.Hour})
	admitted := 0
	for i := range 8 {
		r := unary(t, fleet[i%2], callCtx(t), nil)
		switch r.code() {
		case codes.OK:
			admitted++
		case codes.ResourceExhausted:
			// One unit per 20 minutes, and the burst is spent.
			ri, ok := r.retryInfo()
			if !ok || ri <= 19*time.Minute || ri > 20*time.Minute {
				t.Errorf("call %d: RetryInfo %v (present %v), want just under 20m", i, ri, ok)
			}
			if got, want := one(r.trailer, sluicegrpc.MetadataRetryAfter), itoa(ceilSeconds(ri)); got != want {
				t.Errorf("call %d: retry-after %q, want %q", i, got, want)
			}
		default:
			t.Fatalf("call %d: %v", i, r.err)
		}
	}
	if admitted != 3 {
		t.Fatalf("admitted %d of 8 calls across two servers, want 3", admitted)
	}
}

// Against a real redis-server, concurrency leases are shared by the fleet
// and given back when a stream ends.
func TestRedisFleetStreamLeases(t *testing.T) {
	fleet := redisFleet(t, algorithm.Concurrency{}, core.Policy{Name: "streams", Limit: 2, Window: time.Minute})
	a, r := open(t, fleet[0])
	if a == nil {
		t.Fatal(r.err)
	}
	b, r := open(t, fleet[1])
	if b == nil {
		t.Fatal(r.err)
	}
	for i := range fleet {
		if s, r := open(t, fleet[i]); s != nil || r.code() != codes.ResourceExhausted {
			t.Fatalf("a third stream on server %d: %v, want ResourceExhausted", i, r.err)
		}
	}
	a.close(t)
	c, r := open(t, fleet[1])
	if c == nil {
		t.Fatalf("after a stream on the other server ended: %v, want admitted", r.err)
	}
	if got, want := one(r.header, sluicegrpc.MetadataRateLimit), `"streams";r=0;t=60`; got != want {
		t.Errorf("ratelimit %q, want %q", got, want)
	}
	b.close(t)
	c.close(t)
}
