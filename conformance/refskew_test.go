package conformance

import (
	"time"
)

// refSkew is the clock skew the reference store declares: the largest any
// of its harnesses declares, so that the clamp never cuts inside the skew a
// check puts the fleet under.
const refSkew = 5 * time.Second

// ClockSkew makes the reference store, and every fault built on it, a
// store.ClockSkewer: the skew its harness declares, or refSkew.
func (s *refStore) ClockSkew() time.Duration {
	if s.skew > 0 {
		return s.skew
	}
	return refSkew
}
