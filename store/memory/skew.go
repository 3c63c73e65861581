package memory

import (
	"time"
)

// ClockSkew is zero (store.ClockSkewer): the store is in process, so its
// Limiters read one machine's clock. Declaring it makes every Limiter over
// the store that has a Clock of its own (core.Config.Clock) clamp the
// states it reads (core.Clamper) at once, so a stored time later than any
// step at now could write (a Clock that stepped back, or another
// Limiter's Clock that runs ahead) holds a key still for no longer than
// the policy itself would. A Limiter with no Clock does not clamp, which
// saves a fifth of a decision: it reads the wall clock anchored to the
// process's monotonic clock, so the states it writes are never ahead of
// it; but a state written ahead by another Limiter's Clock holds a key
// for it for as far ahead as that Clock ran, and a step back of the wall
// clock by d holds the keys decided just before it for up to d longer.
// Give every Limiter over one store the same Clock, or none.
func (*Store) ClockSkew() time.Duration { return 0 }
