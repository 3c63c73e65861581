package core

// Shadow mode (Config.Shadow) runs a policy for real, against the real
// store, and reports every decision, but never refuses: the dark launch of
// a new limit (envoy ratelimit's shadow_mode). The Observer hears each
// would-be refusal with Event.Shadowed, so metrics show what the limit
// would have refused before it is enforced.
//
// The caller gets an admission that says nothing about the refusal:
// Allowed, no RetryAfter and no Delay, the Limit and ResetAfter the store
// decided, and Remaining as it stands (zero, or less than the request's
// cost). An HTTP adapter therefore answers as it does for any admission: no
// 429, no Retry-After. The HTTP and gRPC doors announce no RateLimit or
// RateLimit-Policy item of a shadow layer (Limiter.Shadow): a client that
// honours them would otherwise hold the requests the limit is not to
// refuse, which would enforce it.
// A shadow concurrency limiter (Acquire) returns a Lease that holds no slot:
// its Release touches nothing.
//
// Nor does it shape: an admission the store queued (a leaky bucket's
// Delay) is returned with no Delay, so that no door waits for it.
//
// Nor does its store's failure refuse: a store error that the failure
// policy would return (FailClosed, or a fallback that failed too) is an
// admission, Degraded, as under FailOpen, and the Observer hears the
// error: a dark launch must not make its store a dependency of the
// requests it watches. The failure policy's decisions are shadowed like
// the store's (a fallback's refusal is admitted, Degraded and Shadowed).
// An input error, and the end of the caller's context, are still errors.

// shadowAdmission is what a shadow limiter returns for the refusal d.
func shadowAdmission(d Decision) Decision {
	return Decision{Allowed: true, Degraded: d.Degraded, Limit: d.Limit, Remaining: max(d.Remaining, 0), ResetAfter: d.ResetAfter}
}
