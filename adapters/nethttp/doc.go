// Package nethttp is Sluice's HTTP policy and its net/http middleware. The
// gin and echo adapters are thin doors onto the same policy: they hand the
// request to Policy.Admit and translate the result, so every framework
// identifies clients, counts, answers and fails in exactly the same way.
//
//	policy, err := nethttp.NewPolicy(nethttp.Config{
//		Layers: []nethttp.Layer{
//			{Limiter: perIP},                                   // coarse, by address
//			{Limiter: perUser, Key: nethttp.Identity(userKey)}, // by authenticated user
//			{Limiter: inFlight},                                // concurrency, last
//		},
//		SkipPaths:      []string{"/healthz"},
//		TrustedProxies: []string{"10.0.0.0/8"},
//	})
//	mux.Handle("POST /upload", nethttp.Middleware(policy)(upload))
//
// # Who the client is
//
// By default a request is counted under its client address: the
// connection's remote address. Forwarding headers are read only when that
// peer is inside Config.TrustedProxies, and only the one named by
// Config.ProxyHeader (X-Forwarded-For, or Forwarded per RFC 7239). The
// header is walked from the right — the end the nearest proxy wrote — past
// trusted proxies to the first address that is not one: that is the client.
// Hops to its left were written by the client or by untrusted proxies and
// are never read, so a client cannot choose its own identity. A hop that
// is not an address (garbage, "unknown", an obfuscated node) stops the walk
// at the last trusted hop. Forwarded's elements are split from the right
// too, so that what a client wrote to the left of a proxy's element (an
// unterminated quote) cannot swallow it. Ports, IPv6 brackets and zones are accepted and
// dropped; IPv4-mapped IPv6 addresses are IPv4. Addresses are grouped: every
// IPv6 client of one /64 (Config.IPv6Prefix) shares a quota, since one
// subscriber usually holds a whole /64; IPv4 clients are grouped by /32
// (Config.IPv4Prefix). A peer that is not an IP address (a Unix socket)
// has no address; all such requests share one identity.
//
// A Layer's Key can count requests under something else: Identity (a value
// the application stored after its own authentication), Route (the matched
// route pattern: one quota for everyone on it), Header (a header the client
// sends — only when something before this middleware validates it), or any
// KeyFunc. A key that is missing ("") falls back to the client address, so
// no request goes unlimited because it lacks one. Identities are hashed by
// core before they reach a store and are never written to a response.
//
// # Layers
//
// A request must pass every layer, in order. Evaluation stops at the first
// layer that refuses it (or cannot decide): later layers are not charged.
// Refunds on refusal are the default: the units earlier rate layers took
// for the request are given back (core.Receipt), so one user's refused
// requests do not spend the quota of the address or tenant it shares with
// others. A refund never over-admits: it gives back at most what was
// taken, only into the window it was counted in, never above a bucket's
// capacity, and nothing that the refill has since restored (the
// conformance suite proves it under interleavings across instances). It
// costs one store call per earlier layer on a refusal; Config.NoRefund
// keeps the units taken instead.
// Leases already taken by earlier concurrency layers are released at once.
// So put the coarse, cheap layers first and a concurrency layer last.
//
// A layer may also be several limits on one identity, decided at once
// (Layer.Multi with Layer.Limits, or Layer.Tiers for the limits of the
// identity's plan, resolved per request): "10 per second AND 10,000 per
// day", sized to the tenant's tier. Such a layer admits only if every limit
// admits, charges none on a refusal, and writes one RateLimit-Policy and
// one RateLimit item per limit, named by the limit; its Retry-After is the
// longest wait over the limits that refused, and violated-policies names
// them.
//
// Policies per route or group are middleware per route or group: wrap the
// handler inside the mux (net/http), or attach the middleware to a gin or
// echo route or group. Policies attached at two levels stack: both are
// checked, the outer first, and both write their RateLimit items.
//
// Each rate layer charges Layer.Weight units per request, or what
// Layer.Cost computes. A concurrency layer (an algorithm that holds leases)
// takes one lease per request, held until the handler returns — also when
// it panics; the panic then continues up the stack. So put the policy
// inside a wrapper that returns before the work ends
// (http.TimeoutHandler(limit(h), …), not limit(http.TimeoutHandler(h, …)),
// whose inner handler runs on after the timeout without its lease), and
// a hijacked connection holds no lease once its handler returned.
//
// # Responses
//
// An admitted request gets the IETF RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-11) as Structured Field Lists, one
// item per layer that decided it, both fields in the order of the layers:
//
//	RateLimit-Policy: "per-ip";q=100;w=60, "in-flight";q=8;qu="concurrent-requests"
//	RateLimit: "per-ip";r=41;t=17, "in-flight";r=7;t=60
//
// q and w are the policy's Limit and Window (w only when the window is a
// whole number of seconds; a bucket's burst, when it differs from its
// rate, as sluice-burst); r is Decision.Remaining and t is
// Decision.ResetAfter rounded up to whole seconds, from the very decision
// that admitted or refused the request — never a second read. One
// exception: a layer whose units were refunded, because a later layer
// refused the request, shows r with the units its refund gave back (what
// it has now); its t stays the decision's, which a refund can only make
// later than the key's reset, never earlier. A decision
// the failure policy made (Degraded) gets no RateLimit item: nothing is
// known about the quota. A layer in shadow mode (core.Config.Shadow) gets
// no item in either field: it never refuses, and a client that honours the
// fields would hold requests for it. On a 429 or 503, RateLimit-Policy
// still lists the layers after the one that refused, which never decided
// the request, save a tiered one: its limits depend on a tier it never
// resolved (a tiered layer that resolved its tier and then answered
// without a decision, a cost above its quota or a store that failed,
// lists its tier's limits). So a client pairs the two fields' items by
// name. The legacy
// X-RateLimit-Limit, -Remaining and
// -Reset (delta seconds) describe the most constrained layer and are
// written only with Config.LegacyHeaders.
//
// A refused request gets 429 Too Many Requests, a Retry-After in whole
// seconds (rounded up, at least 1: a request sent after it passes every
// layer that decided this one, if nothing else is sent meanwhile; a later
// layer, which never saw this request, may still refuse it) that is the
// longest wait over every layer the retry could not pass now: the refusing layer's, and that of each earlier rate
// layer that admitted the request but kept fewer units than it costs (the
// time until that layer's quota is whole: exact for a fixed window, at
// most that long for the others, which may free units sooner). A layer
// that still has room does not count, nor does a concurrency layer, whose
// lease is released with the refusal. Every RateLimit t stays its own
// layer's reset, and an
// RFC 9457 application/problem+json body of type
// https://iana.org/assignments/http-problem-types#quota-exceeded naming the
// refusing layer in violated-policies. A request whose cost exceeds a
// layer's quota could never be admitted: 429 without Retry-After (a shadow
// layer, which never refuses, lets it pass uncounted: its Observer hears
// nothing of it).
//
// A leaky-bucket layer may admit a request with Decision.Delay: once every
// layer has admitted it, the request waits the longest Delay before its
// handler runs, holding its concurrency leases meanwhile (a queued request
// is in flight). If the request is cancelled while it waits (or while a
// store is asked), it gets 503, its leases are released and the handler
// never runs. Unless Config.NoRefund, its rate layers get their units
// back as on a refusal, the leaky bucket's place in its queue included,
// also when that layer is the last: whole, if no later request queued
// behind it, and otherwise nothing, since the starts the queue gave stay
// one interval apart (algorithm.LeakyBucket's Refund).
//
// # When the store cannot decide
//
// A Limiter whose store fails (core.ErrUnavailable) applies its own
// failure policy. Failing closed, the request gets 503 Service Unavailable
// with a problem of type
// https://iana.org/assignments/http-problem-types#temporary-reduced-capacity
// naming the layer (a multi-limit layer by its limits, the names its
// RateLimit-Policy items carry; a tiered one whose tier could not be
// resolved, by its Multi's name), and no Retry-After (nobody knows when the
// store will be back). Failing open or to a fallback limiter, core admits or decides
// (Decision.Degraded) and the handler runs. The policy never answers 500
// and never panics on a request; a Config mistake is an error from
// NewPolicy, not a surprise at request time. (A Policy NewPolicy never
// made, nil or zero, answers every request 500 rather than serve it with
// no limit.)
package nethttp
