package core

import (
	"github.com/sluicehq/sluice/store"
)

// NewScriptArgs fills the policy's part of the arguments.
func NewScriptArgs(p *Policy, now, n int64) store.ScriptArgs {
	return store.ScriptArgs{
		Now: now, N: n, Limit: p.Limit, Window: p.WindowMicros(), Burst: p.Capacity(),
		Interval: p.IntervalMicros(), MaxDelay: p.MaxDelayMicros(), LeaseTTL: p.LeaseTTLMicros(),
	}
}

// scriptNow is the now a script is sent for a Limiter's own clock's
// reading t: a script reads a now of 0 as "the server's clock", so a
// clock at or before the Unix epoch (a test's) is sent as -1, which the
// script clamps to 0, as the Go steps clamp t.
func scriptNow(t int64) int64 {
	if t <= 0 {
		return -1
	}
	return t
}

// ScriptDecision converts a script's reply to a Decision.
func ScriptDecision(r store.ScriptResult) Decision {
	return Decision{
		Allowed:    r[0] == 1,
		Limit:      r[1],
		Remaining:  r[2],
		RetryAfter: Micros(r[3]),
		ResetAfter: Micros(r[4]),
		Delay:      Micros(r[5]),
	}
}
