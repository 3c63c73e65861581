package redis

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store"
)

// TestRunScriptInjectedClock runs GCRA's twin with an injected now and
// checks the decisions against the Go step.
func TestRunScriptInjectedClock(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *Options
	}{{"batched", nil}, {"direct", &Options{NoBatch: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, tc.opts)
			key := testKey(t, s.Client())
			p := core.Policy{Name: "t", Limit: 3, Window: time.Second}
			alg := algorithm.GCRA{}
			now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
			var state []byte
			for i := range 6 {
				next, _, want := alg.Step(state, now, 1, &p)
				if next != nil {
					state = next
				}
				r, err := s.RunScript(ctxT(t), alg.Script(), key, core.NewScriptArgs(&p, now, 1))
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if got := core.ScriptDecision(r); got != want {
					t.Fatalf("call %d:\n got  %+v\n want %+v", i, got, want)
				}
			}
		})
	}
}

// TestRunScriptRing runs decisions through a Ring of one shard (the store
// builds a ring of its own from it) and checks them against the Go step.
func TestRunScriptRing(t *testing.T) {
	user := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"one": testenv.RedisAddr(t)}})
	t.Cleanup(func() { _ = user.Close() })
	s := New(user, nil)
	t.Cleanup(func() { _ = s.Close() })
	admin := userClient(t)
	key := testKey(t, admin)
	p := core.Policy{Name: "t", Limit: 2, Window: time.Hour}
	alg := algorithm.TokenBucket{}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	var state []byte
	for i := range 4 {
		next, _, want := alg.Step(state, now, 1, &p)
		if next != nil {
			state = next
		}
		r, err := s.RunScript(ctxT(t), alg.Script(), key, core.NewScriptArgs(&p, now, 1))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := core.ScriptDecision(r); got != want {
			t.Fatalf("call %d:\n got  %+v\n want %+v", i, got, want)
		}
	}
	if n, err := admin.Exists(ctxT(t), key.String()).Result(); err != nil || n != 1 {
		t.Fatalf("the ring did not write %s on its shard: %d, %v", key, n, err)
	}
}

// TestRunScriptServerClock: with Now 0 the script reads the server's TIME,
// so a fresh key's ResetAfter after one admission is one interval, as
// measured from the server's clock, not ours.
func TestRunScriptServerClock(t *testing.T) {
	s := newStore(t, nil)
	key := testKey(t, s.Client())
	p := core.Policy{Name: "t", Limit: 10, Window: 10 * time.Second}
	alg := algorithm.GCRA{}
	r, err := s.RunScript(ctxT(t), alg.Script(), key, core.NewScriptArgs(&p, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	d := core.ScriptDecision(r)
	if !d.Allowed || d.Remaining != 9 || d.ResetAfter != time.Second {
		t.Fatalf("first call on the server's clock: %+v, want allowed, remaining 9, reset after 1s", d)
	}
	// The stored TAT is the server's now plus one interval: within a few
	// seconds of the server's TIME.
	tat, err := s.Client().Get(ctxT(t), key.String()).Int64()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := s.Client().Time(ctxT(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if diff := srv.UnixMicro() + int64(time.Second/time.Microsecond) - tat; diff < 0 || diff > int64(5*time.Second/time.Microsecond) {
		t.Fatalf("stored TAT %d is %dµs from the server's TIME + 1s: the script did not read the server's clock", tat, diff)
	}
}

func TestRunScriptBadInput(t *testing.T) {
	s := newStore(t, nil)
	key := testKey(t, s.Client())
	_, err := s.RunScript(ctxT(t), nil, key, store.ScriptArgs{})
	if !errors.Is(err, errNilScript) || !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("nil script: %v", err)
	}
	if err := s.Update(ctxT(t), key, nil); !errors.Is(err, errNilMutation) {
		t.Fatalf("nil mutation: %v", err)
	}
	var nilStore = New(nil, nil)
	if _, err := nilStore.RunScript(ctxT(t), algorithm.GCRA{}.Script(), key, store.ScriptArgs{}); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("nil client: %v", err)
	}
	// Arguments a script's one-integer reply cannot be read with (a
	// zero ScriptArgs: no interval) are refused before sending.
	for _, alg := range []interface {
		core.Algorithm
		core.Scripted
	}{algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.LeakyBucket{}} {
		if _, err := s.RunScript(ctxT(t), alg.Script(), key, store.ScriptArgs{}); !errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrOutcomeUnknown) {
			t.Errorf("%s with zero arguments: %v, want a refusal before sending", alg.Name(), err)
		}
	}
	if n, _ := s.Client().Exists(ctxT(t), key.String()).Result(); n != 0 {
		t.Fatalf("bad input wrote key %s", key)
	}
}

// TestBatchedConcurrent runs many concurrent decisions for one key through
// one store and checks that exactly the quota is admitted.
func TestBatchedConcurrent(t *testing.T) {
	s := newStore(t, &Options{Pipelines: 1, MaxBatch: 8})
	key := testKey(t, s.Client())
	p := core.Policy{Name: "t", Limit: 50, Window: time.Hour}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	alg := algorithm.GCRA{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 200 {
		wg.Go(func() {
			r, err := s.RunScript(context.Background(), alg.Script(), key, core.NewScriptArgs(&p, now, 1))
			if err != nil {
				t.Errorf("RunScript: %v", err)
				return
			}
			if core.ScriptDecision(r).Allowed {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if admitted != 50 {
		t.Fatalf("admitted %d of 200, want exactly 50", admitted)
	}
}
