// Package core is what an application uses to enforce a rate limit: a
// [Limiter] built from a [Config] (a [Policy], an [Algorithm] and a store),
// the [Decision] every check returns, the failure modes for a store that
// cannot answer, the errors, and the [Clock].
//
//	limiter, err := core.New(core.Config{
//		Policy:    core.Policy{Name: "api", Limit: 100, Window: time.Minute},
//		Algorithm: algorithm.GCRA{},
//		Store:     sredis.New(client, nil),
//	})
//	d, err := limiter.Allow(ctx, clientID) // d.Allowed, d.RetryAfter, ...
//
// A denied request is a Decision with Allowed false, never an error. An
// error means the store could not decide (errors.Is(err, ErrUnavailable)),
// or the input was bad (ErrInvalidInput, ErrInvalidPolicy), or the caller's
// context ended.
//
// Several limits on one identity are one decision of a [Multi] over
// [Limits] ("10 per second AND 10,000 per day"; all admit or none is
// charged), chosen per request by [Tiers]; a charge that a later check may
// refuse is made with [Limiter.Charge] and given back with
// [Receipt.Refund]; a cost known only afterwards is reserved
// ([Limiter.Reserve]) and settled; a [Pool] gives tenants a base rate and a
// shared burst pool.
//
// core knows no store, no algorithm and no framework. The contract a store
// implements lives in package store (an application never needs it); the
// algorithms in package algorithm; the HTTP doors in adapters/.
//
// # Time
//
// Every algorithm works in whole microseconds since the Unix epoch. A
// Limiter reads its Clock once per decision. Stores that run scripts on the
// server (Redis, Valkey) read the server's clock instead when the Limiter has
// no Clock of its own, so that instances with skewed clocks agree.
//
// # Keys
//
// A store key is "<prefix>:<policy>:{<hash>}", where <hash> is the first 12
// bytes (store.HashBytes) of the SHA-256 of the identity, in unpadded
// base64url (16 characters, store.HashLen; hex would make every key eight
// bytes longer, and in Redis the key's name is most of what a counter
// costs). An attacker who chooses the
// identity can neither grow the key nor inject separators, and the braces are
// a Redis Cluster hash tag: every key of one identity lands in one slot.
package core
