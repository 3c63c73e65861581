// Package core holds Sluice's contracts: the Policy a limit is written in, the
// Decision every check returns, the Store contract a backend implements, the
// Limiter that ties them together, key building, the clock, the failure
// policy, and the compare-and-swap retry loop that every CAS-based store
// shares.
//
// core imports the standard library only. It knows no store, no algorithm and
// no framework: those live in their own packages and depend on this one.
//
// # Time
//
// Every algorithm works in whole microseconds since the Unix epoch. A
// Limiter reads its Clock once per decision. Stores that run scripts on the
// server (Redis, Valkey) read the server's clock instead when the Limiter has
// no Clock of its own, so that instances with skewed clocks agree. Every
// other store decides on each Limiter's clock; one that declares the skew it
// allows for (ClockSkewer) has every state clamped before the step
// (Clamper, WithClockSkew), so that an instance whose clock runs far ahead
// cannot hold the keys it wrote in its future.
//
// # Keys
//
// A store key is "<prefix>:<policy>:{<hash>}", where <hash> is the first 16
// bytes of the SHA-256 of the identity, in unpadded base64url (22
// characters; hex would make every key ten bytes longer, and in Redis the
// key's name is most of what a counter costs). An attacker who chooses the
// identity can neither grow the key nor inject separators, and the braces are
// a Redis Cluster hash tag: every key of one identity lands in one slot.
package core
