package conformance

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// nextWindowRefund is the fixed window with a planted defect: its refund
// forgets which window the charge was counted in, and gives the units
// back to the key's current window.
type nextWindowRefund struct{ algorithm.FixedWindow }

func (nextWindowRefund) Refund(state []byte, now, _, mark, n int64, p *core.Policy) ([]byte, time.Duration, int64) {
	return algorithm.FixedWindow{}.Refund(state, now, now, mark, n, p)
}

// overfullRefund is the token bucket with a planted defect: its refund
// gives tokens back up to Burst whatever the refill since the charge (its
// mark says the charge still lies wholly ahead), so a bucket that filled
// up again gets the old charge's tokens on top.
type overfullRefund struct{ algorithm.TokenBucket }

func (overfullRefund) Refund(state []byte, now, _, _, n int64, p *core.Policy) ([]byte, time.Duration, int64) {
	return algorithm.TokenBucket{}.Refund(state, now, now, math.MaxInt64, n, p)
}

// noRefund is the fixed window with a planted defect: its refund gives
// nothing back, and says so.
type noRefund struct{ algorithm.FixedWindow }

func (noRefund) Refund(state []byte, _, _, _, _ int64, p *core.Policy) ([]byte, time.Duration, int64) {
	return nil, 0, 0
}

// A refund that gives nothing back holds more, never less, than one that
// works: the count of Refunds cannot see it, and the refund alone on its
// key does.
func TestARefundThatGivesNothingIsCaught(t *testing.T) {
	ref := maker(plain, Capabilities{ClockSkew: time.Second}, true)
	expectAlgFailure(t, checkRefunds, ref, noRefund{}, algorithm.FixedWindow{}, "gave back 0 of 1 unit")
}

// A refund into the next window, and a refund above what a refilled bucket
// withholds, let more than the quota through at one instant: the suite
// says so, and passes the same algorithms without the defect.
func TestPlantedRefundDefectsAreCaught(t *testing.T) {
	ref := maker(plain, Capabilities{ClockSkew: time.Second}, true)
	t.Run("refund into the next window", func(t *testing.T) {
		expectAlgFailure(t, checkRefundEdge, ref, nextWindowRefund{}, algorithm.FixedWindow{}, "OVER-ADMISSION")
	})
	t.Run("refund above capacity", func(t *testing.T) {
		expectAlgFailure(t, checkRefundEdge, ref, overfullRefund{}, algorithm.TokenBucket{}, "OVER-ADMISSION")
	})
}
