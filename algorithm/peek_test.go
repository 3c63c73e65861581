package algorithm

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/inproc"
)

// Peek is Step for every call that writes nothing, and says so for exactly
// those: over states the algorithm wrote itself, states of other
// algorithms and bytes at random, at times before, at and after them.
func TestPeekIsStep(t *testing.T) {
	algs := []core.Algorithm{GCRA{}, TokenBucket{}, FixedWindow{}, LeakyBucket{}, SlidingCounter{}, Calendar{Period: Day}}
	p := &core.Policy{Name: "p", Limit: 4, Window: time.Second, Burst: 4}
	rng := rand.New(rand.NewPCG(3, 4))
	const now0 = int64(1_700_000_000_000_000)
	var states [][]byte
	for _, a := range algs {
		var s []byte
		now := now0
		for range 20 {
			if next, _, _ := a.Step(append([]byte(nil), s...), now, 1, p); next != nil {
				s = next
				states = append(states, append([]byte(nil), s...))
			}
			now += rng.Int64N(400_000)
		}
	}
	for range 200 {
		b := make([]byte, rng.IntN(inproc.PeekCap+1))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		states = append(states, b)
	}
	peeked := 0
	for _, a := range algs {
		pk := a.(inproc.Peeker)
		for _, s := range states {
			for range 10 {
				now := now0 + rng.Int64N(6_000_000) - 1_000_000
				n := rng.Int64N(6) // 0 and 5 are outside 1..Burst
				var w [inproc.PeekCap]byte
				copy(w[:], s)
				allowed, degraded, limit, remaining, retry, reset, delay, ok := pk.Peek(
					binary.LittleEndian.Uint64(w[0:]), binary.LittleEndian.Uint64(w[8:]), binary.LittleEndian.Uint64(w[16:]), len(s), now, n, p)
				next, _, want := a.Step(append([]byte(nil), s...), now, n, p)
				if ok != (next == nil) {
					t.Fatalf("%s on %x at %d, n %d: Peek ok %v, Step next %x", a.Name(), s, now, n, ok, next)
				}
				got := core.Decision{Allowed: allowed, Degraded: degraded, Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset, Delay: delay}
				if ok && got != want {
					t.Fatalf("%s on %x at %d, n %d: Peek %+v, Step %+v", a.Name(), s, now, n, got, want)
				}
				if ok {
					peeked++
				}
			}
		}
	}
	if peeked == 0 {
		t.Fatal("no call wrote nothing: the test compared nothing")
	}
	if _, _, _, _, _, _, _, ok := (GCRA{}).Peek(0, 0, 0, inproc.PeekCap+1, now0, 1, p); ok {
		t.Fatal("Peek accepted a size beyond its words")
	}
}
