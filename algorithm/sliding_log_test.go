package algorithm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

func TestSlidingLogStep(t *testing.T) {
	const s = 1_000_000 // the window, 1 s in µs
	p := core.Policy{Name: "sl", Limit: 3, Window: time.Second}
	winRun(t, SlidingLog{}, p, []winStep{
		{at: 0, n: 1, want: winAllow(2, s)},
		{at: 400_000, n: 2, want: winAllow(0, s)},
		// Full: the oldest unit (at 0) leaves at 1 s.
		{at: 500_000, n: 1, want: winDeny(0, 500_000, 900_000)},
		{at: s - 1, n: 1, want: winDeny(0, 1, 400_001)},
		// At 1 s the unit at 0 has left the window (0, 1 s].
		{at: s, n: 1, want: winAllow(0, s)},
		// Two must leave: the second oldest, at 0.4 s, leaves at 1.4 s
		// (with its twin of the same instant).
		{at: s + 1, n: 2, want: winDeny(0, 399_999, s-1)},
		// Backwards: stands still at 1 s.
		{at: 900_000, n: 1, want: winDeny(0, 500_000, 1_100_000)},
		{at: 1_400_000, n: 2, want: winAllow(0, s)},
		{at: 1_400_000, n: 1, want: winDeny(0, 600_000, s)},
		// Two live units at 1.4 s must both leave for n = Limit.
		{at: 2 * s, n: 3, want: winDeny(1, 400_000, 400_000)},
		{at: 2_400_000, n: 3, want: winAllow(0, s)},
		// Idle: fresh.
		{at: 10 * s, n: 2, want: winAllow(1, s)},
		// A cost above Limit is never admitted and never told to retry.
		{at: 10 * s, n: 4, want: core.Decision{Remaining: 1, ResetAfter: s * time.Microsecond}},
	})
}

func TestSlidingLogCheckPolicy(t *testing.T) {
	ok := core.Policy{Name: "sl", Limit: SlidingLogMaxLimit, Window: time.Minute}
	if err := (SlidingLog{}).CheckPolicy(&ok); err != nil {
		t.Errorf("Limit %d: %v", ok.Limit, err)
	}
	big := core.Policy{Name: "sl", Limit: SlidingLogMaxLimit + 1, Window: time.Minute}
	err := SlidingLog{}.CheckPolicy(&big)
	var pe *core.PolicyError
	if !errors.As(err, &pe) || pe.Field != "Limit" || pe.Policy != "sl" || !errors.Is(err, core.ErrInvalidPolicy) {
		t.Fatalf("Limit %d: %v, want a *core.PolicyError on Limit", big.Limit, err)
	}
}

func TestSlidingLogCompactsInPlace(t *testing.T) {
	// Entries that left the window are dropped when the state is written,
	// in the array the state came in: a store's buffer with room for Limit
	// entries is never outgrown, nor reallocated.
	p := core.Policy{Name: "sl", Limit: 4, Window: time.Second}
	buf := make([]byte, 0, 1+8*p.Limit)
	state := buf // empty: reads as absent
	now := winBase
	admitted := 0
	for i := range 50 {
		now += 300_000
		next, _, _ := SlidingLog{}.Step(state, now, 1+int64(i%2), &p)
		if next == nil {
			continue
		}
		admitted++
		if &next[:1][0] != &buf[:1][0] {
			t.Fatalf("call %d: the state moved to a new array", i)
		}
		if k := (len(next) - 1) / 8; int64(k) > p.Limit {
			t.Fatalf("call %d: %d entries, Limit %d", i, k, p.Limit)
		}
		state = next
	}
	if admitted < 20 {
		t.Fatalf("only %d of 50 calls admitted", admitted)
	}
}

func TestSlidingLogIdleExpiry(t *testing.T) {
	winCheckExpiry(t, SlidingLog{}, core.Policy{Name: "sl", Limit: 5, Window: 10 * time.Millisecond})
}

func TestSlidingLogUndecodable(t *testing.T) {
	p := core.Policy{Name: "sl", Limit: 5, Window: time.Second}
	good, _, _ := SlidingLog{}.Step(nil, winBase, 2, &p)
	if len(good) != 1+2*8 {
		t.Fatalf("state is %d bytes, want %d", len(good), 1+2*8)
	}
	entry := func(us int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(us)) }
	winCheckUndecodable(t, SlidingLog{}, p, good, [][]byte{
		{},
		append([]byte{2}, good[1:]...),
		good[:len(good)-1],
		append(bytes.Clone(good), 0),
		winPatch(good, 1, 0x80),       // a negative time
		winPatch(good, 9, 0x00, 0x10), // a time past winMaxNow
		append(append([]byte{slVersion}, entry(winBase)...), entry(winBase-1)...), // the first after the last
		bytes.Repeat([]byte{0xff}, len(good)),
	})
}

// FuzzSlidingLog drives the step with random clock steps (some backwards)
// and costs, and checks every decision against an independent model: a
// record of admitted (time, n), where n is admitted exactly when the units
// recorded in (now−W, now] leave room. It checks the stated bound (Limit
// per trailing window) and that every Remaining, RetryAfter, ResetAfter and
// TTL is exact.
func FuzzSlidingLog(f *testing.F) {
	winFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, limit, window, start uint64, ops []byte) {
		p := winFuzzPolicy(limit, window, SlidingLogMaxLimit)
		w, l := p.WindowMicros(), p.Limit
		winFuzz(t, SlidingLog{}, p, start, ops, winModel{
			decide: func(recs []winRec, eff, n int64) (bool, int64) {
				live := winSum(recs, eff-w+1, eff+1)
				ok := live+n <= l
				if ok {
					live += n
				}
				return ok, max(0, l-live)
			},
			trailing: l,
		})
	})
}

func BenchmarkSlidingLogStep(b *testing.B) {
	b.Run("100", func(b *testing.B) {
		// 100 per second, a call every 3 ms: about a third admitted, about
		// 100 entries.
		winBench(b, SlidingLog{}, core.Policy{Name: "sl", Limit: 100, Window: time.Second}, 3000)
	})
	b.Run("10000", func(b *testing.B) {
		// The largest log: 10,000 entries, a call every 33 µs.
		winBench(b, SlidingLog{}, core.Policy{Name: "sl", Limit: SlidingLogMaxLimit, Window: time.Second}, 33)
	})
}
