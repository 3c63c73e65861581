package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// seedCase is one algorithm on one path in TestTwoClientsOneLimit.
type seedCase struct {
	alg      core.Algorithm
	noScript bool
	id       string
	fleet    [2]*core.Limiter

	admitted, denied, contended int
	t0, t1                      time.Time // the server's clock around the burst
}

func (c *seedCase) name() string {
	if c.noScript {
		return c.alg.Name() + "/generic"
	}
	return c.alg.Name() + "/script"
}

// serialAdmits is what the Go step admits for calls of one unit, one after
// another, all at one instant, from a fresh key: the count the burst must
// reach exactly when it takes no time.
func serialAdmits(alg core.Algorithm, p *core.Policy, calls int) int {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	var state []byte
	admitted := 0
	for i := range calls {
		var next []byte
		var d core.Decision
		if l, ok := alg.(core.Leaser); ok {
			next, _, d = l.Acquire(state, now, uint64(i+1), p)
		} else {
			next, _, d = alg.Step(state, now, 1, p)
		}
		if next != nil {
			state = next
		}
		if d.Allowed {
			admitted++
		}
	}
	return admitted
}

func serverTime(t *testing.T, c goredis.UniversalClient) time.Time {
	t.Helper()
	tm, err := c.Time(ctxT(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestTwoClientsOneLimit is the seed's check: two separate go-redis clients,
// two Stores, two Limiters, one identity, 25 per 2s on the servers' clock;
// 200 concurrent calls. Exactly the quota is admitted, every denial carries
// a RetryAfter, and after the window admission resumes. All algorithms run
// their bursts first, so that the test sleeps through one window only.
func TestTwoClientsOneLimit(t *testing.T) {
	const calls = 200
	p := core.Policy{Name: "seed", Limit: 25, Window: 2 * time.Second}
	stores := [2]*Store{newStore(t, nil), newStore(t, nil)}
	admin := userClient(t)

	var cases []*seedCase
	for _, alg := range scriptedAlgorithms() {
		for _, noScript := range []bool{false, true} {
			c := &seedCase{alg: alg, noScript: noScript, id: fmt.Sprintf("seed-%d", rand.Int64())}
			for i, s := range stores {
				l, err := core.New(core.Config{Policy: p, Algorithm: alg, Store: s, NoScript: noScript, Prefix: "sluice-test", Timeout: 30 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				c.fleet[i] = l
			}
			key := c.fleet[0].Key(c.id).String()
			t.Cleanup(func() { admin.Del(context.Background(), key) })
			cases = append(cases, c)
		}
	}

	for _, c := range cases {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range calls {
			wg.Go(func() {
				l := c.fleet[i%2]
				<-start
				var d core.Decision
				var err error
				if _, ok := c.alg.(core.Leaser); ok {
					_, d, err = l.Acquire(context.Background(), c.id) // held: never released
				} else {
					d, err = l.Allow(context.Background(), c.id)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case c.noScript && errors.Is(err, core.ErrContention):
					c.contended++
				case err != nil:
					t.Errorf("%s: call %d: %v", c.name(), i, err)
				case d.Allowed:
					c.admitted++
				default:
					c.denied++
					if d.RetryAfter <= 0 {
						t.Errorf("%s: a denial without RetryAfter: %+v", c.name(), d)
					}
				}
			})
		}
		c.t0 = serverTime(t, admin)
		close(start)
		wg.Wait()
		c.t1 = serverTime(t, admin)
	}

	for _, c := range cases {
		want := serialAdmits(c.alg, &p, calls)
		took := c.t1.Sub(c.t0)
		// The burst decides on the server's clock (the script path) or on
		// each Limiter's (the generic path), and takes a little time: a
		// bucket refills one unit per interval of it, and a fixed or
		// sliding-counter window may roll over inside it. Only then may
		// the count exceed the quota, and only by that much.
		extra := int(took / core.Micros(p.IntervalMicros()))
		switch c.alg.(type) {
		case algorithm.SlidingLog, algorithm.Concurrency:
			// A trailing window (a lease) holds the whole burst while it
			// takes less than a window.
			extra = 0
		}
		extra += int(p.Limit) * int(took/p.Window)
		w := p.Window.Microseconds()
		if c.t0.UnixMicro()/w != (c.t1.UnixMicro()+1)/w {
			extra += int(p.Limit)
		}
		switch {
		case c.admitted+c.denied+c.contended != calls:
			// already reported
		case extra == 0 && c.contended == 0 && c.admitted != want:
			t.Errorf("%s: admitted %d of %d, want exactly %d (burst took %s on the server's clock)", c.name(), c.admitted, calls, want, took)
		case c.admitted < want-c.contended || c.admitted > want+extra:
			t.Errorf("%s: admitted %d of %d, want %d (up to %d more: the burst took %s)", c.name(), c.admitted, calls, want, extra, took)
		default:
			t.Logf("%s: admitted %d of %d (burst %s), %d lost compare-and-set races", c.name(), c.admitted, calls, took, c.contended)
		}
	}

	time.Sleep(p.Window + 100*time.Millisecond)
	for _, c := range cases {
		var d core.Decision
		var err error
		if _, ok := c.alg.(core.Leaser); ok {
			var ls *core.Lease
			ls, d, err = c.fleet[1].Acquire(ctxT(t), c.id)
			if ls != nil {
				_ = ls.Release(ctxT(t))
			}
		} else {
			d, err = c.fleet[1].Allow(ctxT(t), c.id)
		}
		if err != nil || !d.Allowed {
			t.Errorf("%s: after the window: %+v, %v; want admitted", c.name(), d, err)
		}
	}
}
