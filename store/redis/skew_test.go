package redis

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// offsetClock reads the real clock plus a fixed offset: an instance whose
// clock is off.
type offsetClock time.Duration

func (c offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c)) }

// TestGenericPathSkewedFleet: on the generic path (NoScript) each instance's
// clock decides and the server expires keys by its own. An instance 700ms
// ahead writes a fixed-window count whose TTL, measured on its clock, ends
// 700ms before the window does by the clock of an instance that is right;
// without an allowance for skew that instance then finds the key gone inside
// the same window and admits a second quota.
func TestGenericPathSkewedFleet(t *testing.T) {
	const (
		window = 4 * time.Second
		ahead  = 700 * time.Millisecond
	)
	p := core.Policy{Name: "skew", Limit: 3, Window: window}
	s := newStore(t, nil)
	mk := func(c core.Clock) *core.Limiter {
		l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.FixedWindow{}, Store: s, Clock: c,
			NoScript: true, Prefix: "sluice-test", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	right, fast := mk(offsetClock(0)), mk(offsetClock(ahead))

	// One attempt: the fast instance spends the quota early in a window, the
	// right one asks late in the same window. It reports false when the
	// calls ran past the window's end (a machine stalled for most of a
	// second), where the right instance's admissions may belong to the next
	// window and prove nothing; the next attempt takes a fresh identity in a
	// later window.
	attempt := func() (admitted int, inTime bool) {
		key := testKey(t, s.Client())
		id := key.Identity
		t.Cleanup(func() { _ = right.Reset(context.Background(), id) })

		// Start 200ms into a window of the right clock (the fast one is
		// then 900ms in), so that both write in the same aligned window.
		now := time.Now()
		start := now.Truncate(window).Add(window + 200*time.Millisecond)
		// ask asks l for a whole quota, one unit at a time.
		ask := func(l *core.Limiter) {
			for range p.Limit {
				d, err := l.Allow(ctxT(t), id)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
		}
		time.Sleep(start.Sub(now))
		ask(fast)
		// Without an allowance the key expires 3.1s after the write, 3.3s
		// into the right clock's window; ask at 3.6s, 400ms before the
		// window ends.
		time.Sleep(time.Until(start.Add(3400 * time.Millisecond)))
		ask(right)
		if end := start.Add(window - 200*time.Millisecond); time.Now().After(end) {
			t.Logf("the calls ran past the window's end (%v late): trying again in a later window", time.Since(end))
			return admitted, false
		}
		return admitted, true
	}
	const attempts = 3
	for range attempts {
		admitted, inTime := attempt()
		if !inTime {
			continue
		}
		if admitted > int(p.Limit) {
			t.Fatalf("OVER-ADMISSION: %d admitted inside one aligned %v window by instances %v apart; the limit is %d",
				admitted, window, ahead, p.Limit)
		}
		return
	}
	t.Fatalf("all %d attempts ran past their window's end: the machine is too slow for this check", attempts)
}

// TestGenericPathTTL: the generic path writes the algorithm's TTL plus the
// store's ClockSkew allowance (DefaultClockSkew unless set; none when
// negative).
func TestGenericPathTTL(t *testing.T) {
	for _, tc := range []struct {
		name  string
		skew  time.Duration
		extra time.Duration
	}{
		{"default", 0, DefaultClockSkew},
		{"250ms", 250 * time.Millisecond, 250 * time.Millisecond},
		{"none", -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, &Options{ClockSkew: tc.skew})
			if got, want := s.ClockSkew(), tc.extra; got != want {
				t.Errorf("ClockSkew() = %v, want %v", got, want)
			}
			key := testKey(t, s.Client())
			const ttl = 30 * time.Second
			m := putMutation{ttl: ttl}
			before := time.Now().UnixMilli()
			for range 2 { // an absent key (SET NX), then a present one (the CAS script)
				if err := s.Update(ctxT(t), key, m); err != nil {
					t.Fatal(err)
				}
			}
			after := time.Now().UnixMilli()
			at, err := s.Client().PExpireTime(context.Background(), key.String()).Result()
			if err != nil {
				t.Fatal(err)
			}
			want := (ttl + tc.extra).Milliseconds()
			if got := at.Milliseconds(); got < before+want || got > after+want+1 {
				t.Fatalf("the key expires %dms after the writes began, want %dms", got-before, want)
			}
		})
	}
}

// putMutation writes "x" with ttl whatever the state.
type putMutation struct{ ttl time.Duration }

func (m putMutation) Apply([]byte) ([]byte, time.Duration) { return []byte("x"), m.ttl }

// A ClockSkew near the largest time.Duration is taken as
// store.MaxClockSkew: lengthening a TTL by it would overflow, leave the
// key with no time to live, and stop the limit on the generic path.
func TestHugeClockSkewStillLimits(t *testing.T) {
	s := newStore(t, &Options{ClockSkew: math.MaxInt64})
	if got := s.ClockSkew(); got != store.MaxClockSkew {
		t.Fatalf("ClockSkew() = %v, want store.MaxClockSkew", got)
	}
	l, err := core.New(core.Config{Policy: core.PerMinute(fmt.Sprintf("huge-skew-%d", time.Now().UnixNano()), 5), Algorithm: algorithm.FixedWindow{}, Store: s, NoScript: true})
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 20 {
		d, err := l.Allow(ctxT(t), "who")
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("%d of 20 admitted under 5 a minute", admitted)
	}
	t.Cleanup(func() { _ = l.Reset(context.Background(), "who") })
}
