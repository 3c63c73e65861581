// Package store is the contract a Sluice store implements, and the kit for
// writing one. Applications never import it: they hand a store (memory,
// redis, valkey, memcache, or yours) to core.Config and use core alone.
//
// # The contract
//
// A store is one method, [Store.Update]: an atomic read-modify-write of one
// key. The Limiter builds a [Mutation] for each decision; Update reads the
// key's state, calls Mutation.Apply once with it, and writes what Apply
// returns, with its TTL, so that no other Update of the same key falls
// between that read and that write. How it is atomic is the store's
// business: a lock (store/memory), a compare-and-swap loop ([CASUpdate],
// store/memcache), one server-side script (store/redis, store/valkey), a
// transaction or a conditional write (a SQL or document database).
//
// What each word means:
//
//   - Key: a [Key] is a namespace ("<prefix>:<policy>") and the raw identity,
//     which may be chosen by an attacker. A network store writes
//     [Key.String] ("<namespace>:{<hash of the identity>}"), never the
//     identity itself; an in-process store may hash it its own way.
//   - State: opaque bytes, written only by the algorithm. Absent is empty
//     (nil, or a zero-length slice a store hands over for its capacity), and
//     absent includes expired: a key whose TTL has run out must read as
//     absent, and must be writable again as a new key. (A store whose
//     "insert if absent" fails while an expired row is in the way refuses
//     that key forever after its first expiry; the conformance suite's
//     Expiry check catches it when the harness is a conformance.Inspector.)
//   - TTL: how long after this write the state may vanish if nothing writes
//     it again; it is computed on the clock of the decision (the Limiter's
//     Clock, or the server's TIME inside a script). A store expires keys by
//     its own clock, so a store that decides on the Limiters' clocks (the
//     generic path of every network store) lengthens each TTL by the
//     largest clock skew of its fleet: keeping a state longer never admits
//     more, dropping it early does. A TTL <= 0 means the state may vanish at
//     once: the store may delete the key, or write nothing.
//   - A nil next from Apply means "unchanged": write nothing.
//
// # Errors
//
// A denied request is not an error: it is a Decision, and the store writes
// whatever the algorithm returned. Update returns an error only when it
// could not decide, and then says what is known:
//
//   - nothing was applied (not sent, refused, rejected before any write):
//     an error matching [ErrUnavailable], e.g. wrapped in [*Error];
//   - it may have been applied (sent, and the reply was lost or came after
//     the deadline): an error from [UnknownOutcome], which matches both
//     [ErrOutcomeUnknown] and ErrUnavailable. Such a call is never retried
//     by the store, since a retry could count one request twice;
//   - the compare-and-swap loop gave up on a hot key: [*ContentionError]
//     (matching [ErrContention] and ErrUnavailable).
//
// Update respects ctx: the Limiter gives every call a deadline, and a store
// that does not return by it turns a slow backend into slow requests. The
// Limiter's failure policy (fail closed, fail open, fallback) decides what
// the application sees.
//
// # What a store may add
//
//   - [Deleter], for core.Limiter.Reset.
//   - [Closer], for connections and background work.
//   - [ScriptRunner], for algorithms with a Lua twin (core.Scripted): the
//     twin runs inside the server in one round trip. A store runs it by
//     hash and loads it on a miss (NOSCRIPT), and must never re-send a
//     script whose outcome is unknown.
//   - [MultiScriptRunner], for several limits on one identity (core.Multi)
//     and for refunds: one script over one key per limit, every key of the
//     one identity (so of one hash tag: one Redis Cluster slot), in one
//     round trip, with the same rules as ScriptRunner. A store without it
//     still decides several limits atomically: core.Multi keeps them all
//     in one item, which one Update (one lock, one compare-and-swap)
//     reads and writes.
//
// # Compare-and-swap stores
//
// A store whose backend offers a conditional write (memcached's cas, an
// UPDATE ... WHERE version = $1, a DynamoDB condition) gets atomicity from
// [CASUpdate]: it supplies a [CASBackend] (Load, Swap) and the shared loop
// does the rest (jittered backoff, a retry bound, [*ContentionError], and
// re-reading the decision time before each attempt). Give CASUpdate an
// unexported type that carries the two methods, so that your Store does not
// export Load and Swap to applications.
//
// # Proving it
//
// The conformance suite (package conformance) is how a store shows it keeps
// every algorithm's bound: call conformance.Run from your store's test with
// a harness that hands out independent clients. The example in the
// conformance package (example_store_test.go: a store over a table of
// versioned rows, made atomic by CASUpdate, and its harness) is a complete
// store in about a hundred lines, and passes the suite.
package store
