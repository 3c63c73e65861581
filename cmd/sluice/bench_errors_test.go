package main

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// failingStore fails every call once fail is set, as a store that went
// down during a run does.
type failingStore struct {
	store.Store
	fail *atomic.Bool
}

func (s failingStore) Update(ctx context.Context, k store.Key, m store.Mutation) error {
	if s.fail.Load() {
		return &store.Error{Op: "update", Err: errors.New("connection refused")}
	}
	return s.Store.Update(ctx, k, m)
}

// A run during which the store went down fails (exit 1), and its errors
// are neither decisions nor in the latencies.
func TestBenchWithErrorsFails(t *testing.T) {
	var fail atomic.Bool
	l, err := core.New(core.Config{Policy: core.PerSecond("b", 1000), Algorithm: algorithm.GCRA{}, Store: failingStore{memory.New(nil), &fail}})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, func() { fail.Store(true) })
	r := benchRun(context.Background(), []*core.Limiter{l}, []string{"a", "b"}, 2, 150*time.Millisecond, algorithm.GCRA{}, func(time.Duration) {})
	if r.errors == 0 || r.hist.count != r.total-r.errors {
		t.Fatalf("%d calls, %d errors, %d latencies; want errors, and latencies of the decisions alone", r.total, r.errors, r.hist.count)
	}
	if err := r.verdict(); !errors.Is(err, errFailed) {
		t.Errorf("a run with %d errors in %d calls: %v; want errFailed", r.errors, r.total, err)
	}
	fail.Store(false)
	r = benchRun(context.Background(), []*core.Limiter{l}, []string{"a"}, 2, 50*time.Millisecond, algorithm.GCRA{}, func(time.Duration) {})
	if r.errors != 0 || r.verdict() != nil {
		t.Errorf("a run with no error: %d errors, verdict %v", r.errors, r.verdict())
	}
}

// A store that answers but refuses the decisions (a replica's READONLY, an
// OOM, an ACL's NOPERM) failed the job (exit 1): it is not unreachable
// (exit 3), and no decision waited out the warm-up's deadline.
func TestBenchStoreThatRefusesFails(t *testing.T) {
	addr := testenv.RedisAddr(t)
	admin := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { admin.Close() })
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "sluice-bench-noperm", "on", ">pw", "+@connection", "~*").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(ctx, "ACL", "DELUSER", "sluice-bench-noperm") })
	code, out, errOut := sluice(t, "bench", "--store", "redis://sluice-bench-noperm:pw@"+addr, "--duration", "300ms", "--progress", "off")
	wantCode(t, code, exitFailed, out, errOut)
	if !strings.Contains(errOut, "NOPERM") || strings.Contains(errOut, "did not finish") {
		t.Errorf("stderr %q: want the server's refusal, not a deadline", errOut)
	}
}
