package conformance_test

import (
	"time"
)

// ClockSkew declares the skew the example store's TTLs allow for
// (store.ClockSkewer), so that a Limiter over it clamps a stored time that a
// clock far ahead wrote: without it one instance an hour fast would hold
// every key it touched an hour in the future (the suite's FastClock check).
func (s *rowStore) ClockSkew() time.Duration { return s.skew }
