package memory

import (
	"time"
)

// ClockSkew is zero (store.ClockSkewer): the store is in process, so its
// Limiters read one machine's clock. Declaring it makes every Limiter over
// the store clamp the states it reads (core.Clamper) at once, so a stored
// time later than any step at now could write (a wall clock that stepped
// back, or a Limiter with a Clock of its own that runs ahead) holds a key
// still for no longer than the policy itself would.
func (*Store) ClockSkew() time.Duration { return 0 }
