package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// The refund checks (Limiter.Charge, Receipt.Refund): a refund gives back
// what the charge took, never more, and never lets more than the quota
// through at one instant, however old the charge it refunds.

func refundable(a core.Algorithm, _ Capabilities, script bool) string {
	if _, ok := a.(core.Refunder); !ok {
		return a.Name() + " has no refund"
	}
	if _, ok := a.(core.RefundScripted); script && !ok {
		return a.Name() + " has no refund twin: on the script path its charges return no Receipt"
	}
	return ""
}

// checkRefunds: concurrentCalls charges of one unit at one instant over the
// fleet, each admitted one refunded at once by a coin's toss, in any
// interleaving. Never more than the quota is held at once (admitted less
// refunded), and a refund at the instant of its charge gives back exactly
// its unit: afterwards the key admits exactly what is left of the quota.
func checkRefunds(t testing.TB, e *env) {
	skipWithoutMulti(t, e)
	p := admissionPolicy(time.Hour)
	clock := core.NewManualClock(epoch)
	fleet := e.fleet(t, p, same(clock, fleetSize)...)
	// Alone first: a charge on a key of its own, refunded at its instant,
	// gives its unit back (a refund that gives nothing would pass the
	// count below, which only finds more held).
	solo := identity(t, fleet[0])
	if d, r, err := fleet[0].Charge(t.Context(), solo, 1); err != nil || !d.Allowed || r == nil {
		t.Errorf("%s: a charge of one unit on a fresh key: %+v, receipt %v, %v; want admitted with a Receipt", e.alg.Name(), d, r, err)
	} else if k, err := r.Refund(t.Context(), 1); k != 1 || err != nil {
		t.Errorf("%s: a refund at the instant of its charge, alone on its key, gave back %d of 1 unit (%v)", e.alg.Name(), k, err)
	}
	id := identity(t, fleet[0])
	var admitted, refunded, failed atomic.Int64
	var firstErr atomic.Value
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range concurrentCalls {
		l := fleet[i%len(fleet)]
		toss := rand.IntN(2) == 0
		wg.Go(func() {
			<-start
			d, r, err := l.Charge(t.Context(), id, 1)
			if err != nil {
				if !errors.Is(err, core.ErrContention) {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				return
			}
			if !d.Allowed {
				return
			}
			admitted.Add(1)
			if r == nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, "an admission returned no Receipt")
				return
			}
			if toss {
				k, err := r.Refund(t.Context(), 1)
				if err != nil && !errors.Is(err, core.ErrNotRefunded) {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
				refunded.Add(k)
				if k2, _ := r.Refund(t.Context(), 1); k2 != 0 {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, "a receipt of one unit refunded twice")
				}
			}
		})
	}
	close(start)
	wg.Wait()
	what := fmt.Sprintf("%s, %d charges at one instant over %d instances, half refunded", e.alg.Name(), concurrentCalls, fleetSize)
	if failed.Load() > 0 {
		t.Errorf("%s: %d calls failed; first: %v", what, failed.Load(), firstErr.Load())
	}
	quota := e.quota(p)
	held := admitted.Load() - refunded.Load()
	if held > quota {
		t.Errorf("%s: OVER-ADMISSION: %d admitted, %d refunded: %d held; the quota is %d", what, admitted.Load(), refunded.Load(), held, quota)
	}
	probe := int64(0)
	for range quota + 1 {
		d, _ := e.take(t, fleet[0], id, 1)
		if !d.Allowed {
			break
		}
		probe++
	}
	if held+probe > quota {
		t.Errorf("%s: OVER-ADMISSION: %d held after the run, then %d more admitted; the quota is %d", what, held, probe, quota)
	} else if held+probe < quota {
		t.Errorf("%s: %d held after the run and only %d more admitted, short of the quota %d: a refund at the instant of its charge lost units", what, held, probe, quota)
	}
}

// edgeOf is the last µs of the window (calendar period) that holds epoch.
func edgeOf(a core.Algorithm, p core.Policy) time.Time {
	if c, ok := a.(algorithm.Calendar); ok {
		_, _, next, _ := c.Bounds(epoch.UnixMicro())
		return time.UnixMicro(next - 1)
	}
	// Windows are counted from the Unix epoch, as the algorithms count
	// them (time.Time.Truncate counts from year 1).
	w := p.Window.Microseconds()
	us := epoch.UnixMicro()
	return time.UnixMicro(us - us%w + w - 1)
}

// checkRefundEdge: the quota is charged in the last µs of a window; then,
// after a gap (1 µs: into the next window; more than a window: a bucket
// full again), the quota is charged again, every earlier charge refunded, and
// charged again. At that one instant no more than the quota may be
// admitted: an old charge's refund must go back into its own window, and
// never into a bucket that the refill has filled since.
func checkRefundEdge(t testing.TB, e *env) {
	skipWithoutMulti(t, e)
	p := admissionPolicy(time.Hour)
	quota := e.quota(p)
	// The second gap ends mid-window: a key written in a window's last µs
	// lives 1 ms on the server's clock, which a ManualClock cannot stop.
	for _, gap := range []time.Duration{time.Microsecond, p.Window + p.Window/3} {
		t0 := edgeOf(e.alg, p)
		clock := core.NewManualClock(t0)
		fleet := e.fleet(t, p, same(clock, fleetSize)...)
		id := identity(t, fleet[0])
		var receipts []*core.Receipt
		for range quota + 1 {
			d, r, err := fleet[0].Charge(t.Context(), id, 1)
			if err != nil {
				t.Fatalf("Charge: %v", err)
			}
			if !d.Allowed {
				break
			}
			receipts = append(receipts, r)
		}
		clock.Set(t0.Add(gap))
		fill := func(l *core.Limiter) int64 {
			c := int64(0)
			for range 2*quota + 1 {
				d, _ := e.take(t, l, id, 1)
				if !d.Allowed {
					break
				}
				c++
			}
			return c
		}
		a1 := fill(fleet[1])
		refunded := int64(0)
		for _, r := range receipts {
			if r == nil {
				continue
			}
			k, err := r.Refund(t.Context(), 1)
			if err != nil && !errors.Is(err, core.ErrNotRefunded) {
				t.Fatalf("Refund: %v", err)
			}
			refunded += k
		}
		a2 := fill(fleet[2])
		if a1+a2 > quota {
			t.Errorf("%s: OVER-ADMISSION: %d charged at %s and refunded %s later (%d given back), then %d + %d admitted at that one instant; the quota is %d",
				e.alg.Name(), len(receipts), t0.Format(time.RFC3339Nano), gap, refunded, a1, a2, quota)
		}
	}
}

// skipWithoutMulti skips a refund check on the script path of a store that
// cannot run the multi-limit script, which reports the decision's time a
// refund needs: there Limiter.Charge is AllowN and returns no Receipt.
func skipWithoutMulti(t testing.TB, e *env) {
	if _, ok := e.stores[0].(store.MultiScriptRunner); e.script && !ok {
		t.Skip("the store is no store.MultiScriptRunner: on the script path a charge returns no Receipt")
	}
}
