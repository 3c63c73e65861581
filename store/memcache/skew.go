package memcache

import (
	"time"
)

// ClockSkew is Options.ClockSkew as New filled it in (store.ClockSkewer):
// the allowance every TTL gets for the fleet's clocks. A Limiter over the
// Store clamps a stored time that lies more than this ahead of its own
// clock, so one instance whose clock runs far ahead cannot hold the keys it
// touched in its future (see the package doc).
func (s *Store) ClockSkew() time.Duration { return s.cfg.skew }
