package algorithm

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// stepAny steps a (Acquire with a fresh lease id for a Leaser).
func stepAny(a core.Algorithm, state []byte, now int64, p *core.Policy, id uint64) ([]byte, time.Duration, core.Decision) {
	if l, ok := a.(core.Leaser); ok {
		return l.Acquire(state, now, id, p)
	}
	return a.Step(state, now, 1, p)
}

// TestClampBoundsAFastClock: a state written by a clock an hour ahead is
// clamped to what a clock skew ahead would have written; the correct clock
// then has its whole quota back within skew plus the policy's recovery, and
// every TTL written is at most what the policy needs plus skew. A state
// written within skew is left exactly as it is.
func TestClampBoundsAFastClock(t *testing.T) {
	p := core.Policy{Name: "p", Limit: 5, Window: time.Minute, Burst: 5, MaxDelay: 30 * time.Second, LeaseTTL: time.Minute}
	const now = int64(1_773_501_600_000_000)
	skew := time.Second
	s := int64(skew / time.Microsecond)
	hour := int64(time.Hour / time.Microsecond)
	recovery := 2*p.WindowMicros() + p.Capacity()*p.IntervalMicros() + p.MaxDelayMicros() + p.LeaseTTLMicros()
	need := core.Micros(recovery)
	for _, alg := range All() {
		t.Run(alg.Name(), func(t *testing.T) {
			step := core.WithClockSkew(alg, skew)
			// Within skew: nothing moves.
			near, _, _ := stepAny(alg, nil, now+s, &p, 1)
			if got, _, c := alg.(core.Clamper).Clamp(bytes.Clone(near), now, s, &p); c || !bytes.Equal(got, near) {
				t.Errorf("a state written %v ahead was clamped (%v)", skew, c)
			}
			// An hour ahead: clamped, written back, and recovered from.
			state, _, d := stepAny(alg, nil, now+hour, &p, 1)
			if !d.Allowed {
				t.Fatalf("fresh key denied: %+v", d)
			}
			next, ttl, d := stepAny(step, bytes.Clone(state), now, &p, 2)
			if next == nil {
				t.Fatalf("the clamped state was not written back (decision %+v)", d)
			}
			if ttl > need+skew || ttl <= 0 {
				t.Errorf("TTL after the clamp = %v, want in (0, %v]", ttl, need+skew)
			}
			if d.RetryAfter > need+skew || d.ResetAfter > need+skew {
				t.Errorf("after the clamp RetryAfter %v, ResetAfter %v: more than %v", d.RetryAfter, d.ResetAfter, need+skew)
			}
			state = next
			at := now + s + recovery
			q := alg.Quota(&p)
			for i := range q {
				next, _, d := stepAny(step, bytes.Clone(state), at, &p, uint64(10+i))
				if !d.Allowed {
					t.Fatalf("unit %d of %d at skew + recovery after the clamp was denied: %+v", i+1, q, d)
				}
				state = next
			}
		})
	}
}
