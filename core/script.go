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
