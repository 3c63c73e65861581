package algorithm

import (
	"fmt"

	"github.com/sluicehq/sluice/core"
)

// capLimit refuses a Limit above most for an algorithm (named by what)
// whose state grows with Limit.
func capLimit(p *core.Policy, most int64, what string) error {
	if p.Limit > most {
		return &core.PolicyError{Policy: p.Name, Field: "Limit", Reason: fmt.Sprintf(
			"must be at most %d for %s, got %d", most, what, p.Limit)}
	}
	return nil
}

// stateBuf returns buf emptied, to append a state of n bytes to: buf itself
// when it can hold them (a decision on an existing key writes in place),
// else one new slice of exactly that capacity (appending to a short buf
// would grow it twice).
func stateBuf(buf []byte, n int) []byte {
	if cap(buf) < n {
		return make([]byte, 0, n)
	}
	return buf[:0]
}
