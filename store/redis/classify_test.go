package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// These tests hold the store's errors to what is known of each command: not
// sent, rejected by the server before the script wrote anything, or sent
// with its reply lost. Only the last may match core.ErrOutcomeUnknown; all
// match core.ErrUnavailable.

// wantKnown fails the test unless err is a store error that says the
// command did not run.
func wantKnown(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s: no error", what)
	case !errors.Is(err, core.ErrUnavailable):
		t.Fatalf("%s: %v does not match core.ErrUnavailable", what, err)
	case errors.Is(err, core.ErrOutcomeUnknown):
		t.Fatalf("%s: %v says the outcome is unknown, but the command provably did not run", what, err)
	}
}

// TestClosedPortNotUnknown: nothing listens; go-redis dials in the
// background (retrying the refused dial) until the caller's deadline. The
// command was never sent.
func TestClosedPortNotUnknown(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	for _, noBatch := range []bool{false, true} {
		rdb := goredis.NewClient(&goredis.Options{Addr: addr})
		t.Cleanup(func() { _ = rdb.Close() })
		s := New(rdb, &Options{NoBatch: noBatch})
		t.Cleanup(func() { _ = s.Close() })
		for i := range 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			_, err := s.RunScript(ctx, algorithm.GCRA{}.Script(), store.Key{Namespace: "x", Identity: "y"}, store.ScriptArgs{N: 1, Limit: 1, Window: 1e6, Burst: 1, Interval: 1e6})
			cancel()
			wantKnown(t, fmt.Sprintf("NoBatch %v, call %d on a closed port", noBatch, i), err)
		}
	}
}

// TestStoppedServerNotUnknown: the server answers, then stops; from then on
// every call's dial is refused, and no call says its outcome is unknown
// once the store has seen the connection go (go-redis checks a pooled
// connection before it uses it).
func TestStoppedServerNotUnknown(t *testing.T) {
	srv := startServer(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.addr})
	t.Cleanup(func() { _ = rdb.Close() })
	s := New(rdb, nil)
	t.Cleanup(func() { _ = s.Close() })
	lim, err := core.New(core.Config{Policy: core.Policy{Name: "stop", Limit: 100, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := lim.Allow(ctx, "a"); err != nil {
		t.Fatalf("before the stop: %v", err)
	}
	srv.Stop()
	time.Sleep(50 * time.Millisecond) // the connection's end reaches the client
	for i := range 5 {
		_, err := lim.Allow(ctx, "a")
		wantKnown(t, fmt.Sprintf("call %d after the server stopped", i), err)
	}
}

// TestPoolWaitNotUnknown: the only connection is busy with a stalled call;
// the next call's deadline passes while it waits for a connection, before
// its command was written. It did not run.
func TestPoolWaitNotUnknown(t *testing.T) {
	srv := startServer(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.addr, PoolSize: 1, MaxActiveConns: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	s := New(rdb, &Options{NoBatch: true})
	t.Cleanup(func() { _ = s.Close() })
	key := store.Key{Namespace: "pool", Identity: t.Name()}
	if _, err := s.RunScript(ctxT(t), countScript, key, store.ScriptArgs{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Holds the only connection while the server sleeps.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.Client().Do(ctx, "debug", "sleep", "0.4").Err(); err != nil {
			t.Errorf("DEBUG SLEEP: %v", err)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := s.RunScript(ctx, countScript, key, store.ScriptArgs{})
	cancel()
	wg.Wait()
	wantKnown(t, "a call that waited for a connection", err)
	if n := runs(t, srv.admin, key); n != 1 {
		t.Fatalf("the script ran %d times; want 1 (the warm-up only)", n)
	}
}

// TestOOMScriptNotUnknown: with maxmemory reached and noeviction, the
// script's first write is refused with OOM; the script wrote nothing, so
// the outcome is known, on the script path and on the generic path.
func TestOOMScriptNotUnknown(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := srv.admin.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { srv.admin.ConfigSet(context.Background(), "maxmemory", "0") })
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.addr})
	t.Cleanup(func() { _ = rdb.Close() })
	s := New(rdb, nil)
	t.Cleanup(func() { _ = s.Close() })
	// Every algorithm: the concurrency script's first write must be its
	// lease (ZADD, which Redis checks for OOM), not the trim of expired
	// leases (ZREMRANGEBYSCORE, which it does not check).
	for _, alg := range algorithm.All() {
		for _, noScript := range []bool{false, true} {
			name := fmt.Sprintf("%s NoScript %v", alg.Name(), noScript)
			lim, err := core.New(core.Config{Policy: core.Policy{Name: fmt.Sprintf("oom-%s-%v", alg.Name(), noScript), Limit: 10, Window: time.Minute, LeaseTTL: time.Minute},
				Algorithm: alg, Store: s, NoScript: noScript})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := alg.(core.Leaser); ok {
				_, _, err = lim.Acquire(ctx, "a")
			} else {
				_, err = lim.Allow(ctx, "a")
			}
			wantKnown(t, name+" under OOM", err)
			if n, _ := srv.admin.Exists(ctx, lim.Key("a").String()).Result(); n != 0 {
				t.Fatalf("%s: the key was written under OOM", name)
			}
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestScriptErrorAfterWriteUnknown: a script that wrote, then failed, has
// an unknown outcome (it is not mistaken for a refusal).
func TestScriptErrorAfterWriteUnknown(t *testing.T) {
	srv := startServer(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.addr})
	t.Cleanup(func() { _ = rdb.Close() })
	s := New(rdb, nil)
	t.Cleanup(func() { _ = s.Close() })
	sc := store.NewScript("test-write-then-fail", `redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[1], 'f', 'v')
return {1, 0, 0, 0, 0, 0}`)
	_, err := s.RunScript(ctxT(t), sc, store.Key{Namespace: "w", Identity: t.Name()}, store.ScriptArgs{})
	if !errors.Is(err, core.ErrOutcomeUnknown) {
		t.Fatalf("a script that failed after a write: %v; want an unknown outcome", err)
	}
	// Worded as on every store: the store's error, then what is known.
	if want := "sluice: store script: outcome unknown: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start %q", err, want)
	}
}

// TestRejectedReplies: which error replies prove that a script wrote
// nothing, in the forms Redis 7 / Valkey and Redis 6 give them.
func TestRejectedReplies(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"NOSCRIPT No matching script. Please use EVAL.", true},
		{"OOM command not allowed when used memory > 'maxmemory'.", true},
		{"OOM command not allowed when used memory > 'maxmemory'. script: 177d, on @user_script:104.", true},
		{"READONLY You can't write against a read only replica. script: 177d, on @user_script:9.", true},
		{"MISCONF Redis is configured to save RDB snapshots. script: 177d, on @user_script:9.", true},
		{"NOREPLICAS Not enough good replicas to write. script: 177d, on @user_script:9.", true},
		{"ERR Error running script (call to f_177d): @user_script:1: @user_script: 1: -OOM command not allowed when used memory > 'maxmemory'.", true},
		{"WRONGTYPE Operation against a key holding the wrong kind of value script: 177d, on @user_script:2.", false},
		{"ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 177d, on @user_script:1.", false},
		{"ERR Error running script (call to f_177d): @user_script:1: @user_script: 1: -WRONGTYPE Operation against a key", false},
		{"BUSY Redis is busy running a script. script: 177d, on @user_script:1.", false},
		{"OOMX not a code", false},
	} {
		if got := rejected(tc.msg); got != tc.want {
			t.Errorf("rejected(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}

// TestSentinelNoPrimaryNotUnknown: a failover store whose sentinels cannot
// name a primary (they do not know the master's name, or none of them
// answers) fails in its dial, before any command was written. The
// command did not run.
func TestSentinelNoPrimaryNotUnknown(t *testing.T) {
	for _, c := range []struct {
		name      string
		sentinels []string
		master    string
	}{
		{"unknown master", []string{testenv.RedisSentinelAddr(t)}, "no-such-master"},
		{"no sentinel answers", []string{fmt.Sprintf("127.0.0.1:%d", freePort(t))}, testenv.SentinelFailoverMaster},
	} {
		for _, noBatch := range []bool{false, true} {
			// A pool of two: after two failed dials, go-redis answers
			// with the last dial's error at once, rather than waiting
			// for the deadline.
			s := NewFailover(&goredis.FailoverOptions{MasterName: c.master, SentinelAddrs: c.sentinels, PoolSize: 2}, &Options{NoBatch: noBatch})
			t.Cleanup(func() { _ = s.Close() })
			lim, err := core.New(core.Config{Policy: core.Policy{Name: "np", Limit: 10, Window: time.Minute}, Algorithm: algorithm.GCRA{}, Store: s, Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := lim.Allow(ctx, "a")
				cancel()
				wantKnown(t, fmt.Sprintf("%s, NoBatch %v, call %d", c.name, noBatch, i), err)
			}
		}
	}
}
