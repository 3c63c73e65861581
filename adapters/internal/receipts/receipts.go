// Package receipts keeps the receipts of the rate layers a door charged for
// one request (core.Receipt), so that it can give their units back when a
// later layer refuses the request or cannot decide: the HTTP and gRPC
// doors' refunds.
package receipts

import (
	"context"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
)

// Queues reports whether alg may admit with a Delay (the leaky bucket as a
// queue). A request it admitted can still give up while it waits, so a
// door keeps the charge's receipt, to give the place back, even for a
// layer that no later layer could refuse.
func Queues(alg core.Algorithm) bool {
	switch alg.(type) {
	case algorithm.LeakyBucket, *algorithm.LeakyBucket:
		return true
	}
	return false
}

// Set is the receipts of one request, each with the index of its layer's
// outcome in the door's own list. The zero Set is empty and ready. It
// holds four in arrays of its own, and no slice into them: a Set that
// pointed into itself would escape to the heap, an allocation a request.
type Set struct {
	buf  [4]*core.Receipt
	at   [4]int
	n    int
	more []held // beyond four
}

// held is a receipt beyond the first four, and its layer's index.
type held struct {
	rc *core.Receipt
	at int
}

// Add keeps rc, the receipt of the layer whose outcome is at index at. A
// nil rc (a layer that charged nothing) is ignored.
func (s *Set) Add(rc *core.Receipt, at int) {
	switch {
	case rc == nil:
	case s.n < len(s.buf):
		s.buf[s.n], s.at[s.n] = rc, at
		s.n++
	default:
		s.more = append(s.more, held{rc, at})
	}
}

// Refund gives back every receipt's units and calls credit with each
// layer's index and the units it got back, for the layer's fields (its r,
// and whether it still holds the retry back). The client may be gone; the
// refunds still run, under the limiters' own deadlines.
func (s *Set) Refund(ctx context.Context, credit func(at int, k int64)) {
	if s.n == 0 {
		return
	}
	rctx := context.WithoutCancel(ctx)
	for j, rc := range s.buf[:s.n] {
		if k, _ := rc.Refund(rctx, rc.N()); k > 0 {
			credit(s.at[j], k)
		}
	}
	for _, h := range s.more {
		if k, _ := h.rc.Refund(rctx, h.rc.N()); k > 0 {
			credit(h.at, k)
		}
	}
}
