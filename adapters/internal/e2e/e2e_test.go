package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/internal/adaptertest"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/testenv"
)

// client sends many requests at once to the fleet.
func client() *http.Client {
	return &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 256},
	}
}

// TestFleetAdmitsExactlyTheLimit sends 200 concurrent requests for one
// client (one address) spread over the three instances, and counts: exactly
// limit are admitted, all others get a 429, and the admitted ones saw every
// remaining count from limit-1 down to 0 once (each response's fields come
// from the decision that admitted it).
func TestFleetAdmitsExactlyTheLimit(t *testing.T) {
	addr := testenv.RedisAddr(t)
	const limit, requests = 50, 200
	for _, alg := range []core.Algorithm{algorithm.SlidingLog{}, algorithm.GCRA{}, algorithm.TokenBucket{}, algorithm.SlidingCounter{}} {
		t.Run(alg.Name(), func(t *testing.T) {
			// A one-hour window: nothing is earned back during the test, so
			// the bound is exactly the limit. A generous deadline: this test
			// counts admissions, and a call that times out under the race
			// detector is a 503 whose unit may still have been taken.
			sp := spec{alg: alg, policy: core.Policy{Name: "fleet", Limit: limit, Window: time.Hour}, prefix: prefix(t), timeout: 10 * time.Second}
			insts := fleet(t, addr, sp)
			c := client()
			type result struct {
				inst string
				r    adaptertest.Response
			}
			results := make([]result, requests)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					in := insts[i%len(insts)]
					results[i] = result{in.name, adaptertest.Do(t, c, "GET", in.url)}
				}()
			}
			close(start)
			wg.Wait()

			var admitted, refused int
			perInstance := map[string]int{}
			var remaining []int64
			for _, res := range results {
				switch res.r.Status {
				case http.StatusOK:
					admitted++
					perInstance[res.inst]++
					if string(res.r.Body) != res.inst {
						t.Errorf("%s answered with %q", res.inst, res.r.Body)
					}
					it, ok := adaptertest.Find(adaptertest.CheckFields(t, res.r), "fleet")
					if !ok {
						t.Errorf("%s: admitted without a RateLimit item", res.inst)
						continue
					}
					v, _ := it.Int("r")
					remaining = append(remaining, v)
				case http.StatusTooManyRequests:
					refused++
					adaptertest.CheckDenied(t, res.r, "fleet")
				default:
					t.Errorf("%s: status %d (%s)", res.inst, res.r.Status, res.r.Body)
				}
			}
			if admitted != limit || refused != requests-limit {
				t.Fatalf("admitted %d and refused %d of %d, want exactly %d admitted", admitted, refused, requests, limit)
			}
			slices.Sort(remaining)
			for i, v := range remaining {
				if v != int64(i) {
					t.Fatalf("admitted responses' r values %v, want each of 0..%d once", remaining, limit-1)
				}
			}
			t.Logf("admitted per instance: %v", perInstance)
		})
	}
}

// TestRetryAfterIsHonest exhausts a one-second limit through one instance,
// waits the Retry-After of the 429, and is then admitted by another.
func TestRetryAfterIsHonest(t *testing.T) {
	addr := testenv.RedisAddr(t)
	for _, alg := range []core.Algorithm{algorithm.FixedWindow{}, algorithm.SlidingLog{}, algorithm.GCRA{}} {
		t.Run(alg.Name(), func(t *testing.T) {
			t.Parallel()
			// A generous store deadline: a cold connection on a loaded
			// machine can take longer than the default, and this test is
			// about Retry-After, not latency.
			sp := spec{alg: alg, policy: core.Policy{Name: "short", Limit: 3, Window: time.Second}, prefix: prefix(t), timeout: 10 * time.Second}
			insts := fleet(t, addr, sp)
			c := client()
			var denied adaptertest.Response
			deniedBy := 0
			for i := 0; i < 10 && denied.Status == 0; i++ {
				r := adaptertest.Do(t, c, "GET", insts[i%3].url)
				switch r.Status {
				case http.StatusOK:
				case http.StatusTooManyRequests:
					denied, deniedBy = r, i%3
				default:
					t.Fatalf("request %d: %d %s", i, r.Status, r.Body)
				}
			}
			if denied.Status == 0 {
				t.Fatal("10 requests within a 3-per-second limit were all admitted")
			}
			ra := adaptertest.CheckDenied(t, denied, "short")
			if ra != 1 {
				t.Fatalf("Retry-After %d on a one-second window, want 1", ra)
			}
			time.Sleep(time.Duration(ra) * time.Second)
			in := insts[(deniedBy+1)%3]
			if r := adaptertest.Do(t, c, "GET", in.url); r.Status != http.StatusOK {
				t.Fatalf("%s, after %s said Retry-After %d and it was waited: %d %s", in.name, insts[deniedBy].name, ra, r.Status, r.Body)
			}
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// blackHole returns a loopback address that accepts connections and never
// answers: a hung server.
func blackHole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		_ = ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				go func() { <-ctx.Done(); _ = conn.Close() }()
				_, _ = io.Copy(io.Discard, conn)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestStoreDown points the fleet at a closed port and at a server that
// never answers. Failing closed, every instance answers 503 without
// Retry-After, within the limiter's deadline (a request that hung would
// meet the client's 30-second timeout instead); failing open, 200.
func TestStoreDown(t *testing.T) {
	const deadline = 200 * time.Millisecond
	for _, down := range []struct {
		name string
		addr func(*testing.T) string
	}{{"closed port", closedPort}, {"black hole", blackHole}} {
		for _, mode := range []core.FailureMode{core.FailClosed, core.FailOpen} {
			t.Run(down.name+"/"+mode.String(), func(t *testing.T) {
				t.Parallel()
				sp := spec{
					alg:     algorithm.FixedWindow{},
					policy:  core.Policy{Name: "down", Limit: 5, Window: time.Minute},
					prefix:  prefix(t),
					timeout: deadline,
					failure: mode,
				}
				insts := fleet(t, down.addr(t), sp)
				c := client()
				for i := 0; i < 6; i++ {
					in := insts[i%3]
					began := time.Now()
					r := adaptertest.Do(t, c, "GET", in.url)
					// Generous against a loaded machine, yet far below the
					// client's timeout: a request that hung would get there.
					if took := time.Since(began); took > deadline+5*time.Second {
						t.Errorf("%s answered after %v with a %v store deadline", in.name, took, deadline)
					}
					switch mode {
					case core.FailClosed:
						adaptertest.CheckUnavailable(t, r, "down")
					case core.FailOpen:
						if r.Status != http.StatusOK {
							t.Fatalf("%s failing open: %d %s", in.name, r.Status, r.Body)
						}
						if r.Header.Get("RateLimit") != "" {
							t.Errorf("%s failing open wrote RateLimit %q", in.name, r.Header.Get("RateLimit"))
						}
					}
				}
			})
		}
	}
}
