// Package sluicegrpc enforces Sluice limits on gRPC servers: unary and
// stream server interceptors for google.golang.org/grpc that apply the same
// policy as Sluice's HTTP doors (adapters/nethttp) — layered limits, client
// identity that cannot be spoofed by default, an honest retry delay, the
// IETF RateLimit fields, and an explicit answer when the store cannot
// decide.
//
//	import sluicegrpc "github.com/sluicehq/sluice/adapters/grpc"
//
//	policy, err := sluicegrpc.NewPolicy(sluicegrpc.Config{
//		Layers: []sluicegrpc.Layer{
//			{Limiter: perIP},                                      // coarse, by peer address
//			{Limiter: perUser, Key: sluicegrpc.Identity(userKey)}, // by authenticated user
//			{Limiter: inFlight},                                   // concurrency, last
//		},
//		SkipMethods: []string{"/grpc.health.v1.Health/"},
//	})
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(auth, sluicegrpc.UnaryServerInterceptor(policy)),
//		grpc.ChainStreamInterceptor(authStream, sluicegrpc.StreamServerInterceptor(policy)),
//	)
//
// The package is named sluicegrpc, not grpc like its directory, so that a
// file can import it beside google.golang.org/grpc without renaming either.
//
// The interceptors follow go-grpc-middleware's ratelimit conventions
// (UnaryServerInterceptor and StreamServerInterceptor functions, a refusal
// is codes.ResourceExhausted naming the method) without depending on it:
// its Limiter interface, Limit(ctx) error, has no way to hold a lease for
// the length of a call or to write response metadata.
//
// # Who the client is
//
// By default a call is counted under its client address: the connection's
// peer address (peer.FromContext), grouped like the HTTP policy's (every
// IPv6 client of one /64 shares a quota, Config.IPv6Prefix; IPv4 by /32,
// Config.IPv4Prefix). Forwarding metadata is read only when that peer is
// inside Config.TrustedProxies, and only the key named by
// Config.ProxyHeader: x-forwarded-for, or forwarded (RFC 7239). It is walked
// from the right, past trusted proxies, to the first address that is not
// one, exactly as the HTTP policy walks its header; so by default no
// metadata is ever believed, and a client cannot choose its own identity.
// A peer that is not an IP address (a Unix socket) has no address; all
// such calls share one identity.
//
// A Layer's Key can count calls under something else: Identity (a value an
// earlier interceptor stored in the context after it validated the
// caller), Method (the full method name: one quota for everyone calling
// it), Metadata (a metadata key the client sends — only when something
// before this policy validates it), or any KeyFunc. A key that is missing
// ("") falls back to the client address, so no call goes unlimited because
// it lacks one. Identities are hashed by core before they reach a store and
// are never written to a response.
//
// Config.SkipMethods names methods (or whole services) that are never
// limited, such as the health service; Config.Skip decides further calls.
//
// # Layers, streams and leases
//
// A call must pass every layer, in order, with the HTTP policy's rules:
// evaluation stops at the first layer that refuses it (or cannot decide),
// the units earlier rate layers took for it are refunded (core.Receipt;
// Config.NoRefund keeps them), and leases already taken by earlier
// concurrency layers are released at once. Put the coarse layers first and
// a concurrency layer last.
//
// A stream is charged once, when it opens, whatever the number of messages
// it carries. A concurrency layer (an algorithm that holds leases, via
// Limiter.Acquire) takes one lease per call, held until the handler
// returns: for a unary call, until the response is ready; for a stream,
// until the stream is over. It is released when the handler panics too.
// The lease is released before grpc-go sends the call's status, so a
// client that has seen a call end can count on its slot being free.
//
// # Responses
//
// An admitted call gets the IETF RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers-11) as response header metadata,
// in the HTTP policy's Structured Field syntax, one item per layer that
// decided it:
//
//	ratelimit-policy: "per-ip";q=100;w=60, "in-flight";q=8;qu="concurrent-requests"
//	ratelimit: "per-ip";r=41;t=17, "in-flight";r=7;t=60
//
// q and w are the policy's Limit and Window (w only when the window is a
// whole number of seconds; a bucket's burst, when it differs from its
// rate, as sluice-burst); r is Decision.Remaining and t is
// Decision.ResetAfter rounded up to whole seconds, from the very decision
// that admitted or refused the call; a layer whose units were refunded
// (a later layer refused the call) shows r with the units its refund gave
// back, and the decision's t, which a refund can only make later than the
// key's reset, never earlier. A decision the failure policy made
// (Degraded) gets no ratelimit item, and a layer in shadow mode
// (core.Config.Shadow) no item in either field: it never refuses, and a
// client that honours the fields would hold calls for it.
//
// A refused call gets codes.ResourceExhausted, its handler never runs, and
// its status carries two standard details: a google.rpc.RetryInfo whose
// retry_delay is the honest wait — the longest over every layer the retry
// could not pass now, computed as the HTTP policy computes Retry-After
// (the refusing layer's RetryAfter, and the reset of each earlier rate
// layer that kept fewer units than the call costs, after its refund), but exact to the
// microsecond instead of rounded to seconds — and a google.rpc.QuotaFailure
// whose violation subject is the refusing policy's name. The ratelimit and
// ratelimit-policy fields, and retry-after (the same wait in whole seconds,
// rounded up, at least 1), are sent both as header and as trailer metadata:
// grpc-go clients read either (grpc.Header, grpc.Trailer), several other
// clients show only trailers beside an error. A call whose cost exceeds a
// layer's quota could never be admitted: ResourceExhausted without
// RetryInfo or retry-after (a shadow layer, which never refuses, lets it
// pass uncounted: its Observer hears nothing of it).
//
// A leaky-bucket layer may admit a call with Decision.Delay: once every
// layer has admitted it, the interceptor sleeps the longest Delay before
// the handler runs, holding the call's concurrency leases meanwhile, as
// the HTTP policy does. If the call's context ends while it waits (the
// client cancelled, or its deadline passed), the call ends with
// codes.Canceled or codes.DeadlineExceeded, its leases are released, and
// the handler never runs. Unless Config.NoRefund, its rate layers get
// their units back as on a refusal, the leaky bucket's place in its queue
// included, also when that layer is the last: whole, if no later call
// queued behind it, and otherwise nothing, since the starts the queue gave
// stay one interval apart (algorithm.LeakyBucket's Refund).
//
// # When the store cannot decide
//
// A Limiter whose store fails (core.ErrUnavailable) applies its own
// failure policy. Failing closed, the call gets codes.Unavailable naming
// the layer, with no RetryInfo (nobody knows when the store will be back);
// a client's retry policy may retry Unavailable, which is what it is for.
// Failing open or to a fallback limiter, core admits or decides
// (Decision.Degraded) and the handler runs. A call whose own context ended
// while a store was asked gets codes.Canceled or codes.DeadlineExceeded.
//
// Nothing a client sends can make the interceptors panic or answer
// codes.InvalidArgument: every Config mistake is an error from NewPolicy,
// a missing identity falls back to the client address, and a cost is
// checked against the quota before any store call. Should core still
// reject its input (a bug, not a client's fault), the call gets
// codes.Internal, never InvalidArgument, which would tell the client to
// change a request it did nothing wrong in.
package sluicegrpc
