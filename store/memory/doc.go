// Package memory is Sluice's in-process store: sharded hash tables guarded by
// mutexes, with a bounded key count and expiry.
//
// It is for a single instance, for tests and simulations, and as the store of
// the local fallback limiter that a Limiter's failure policy (core.FailFallback)
// asks when the shared store cannot decide. Its state lives in one process and
// is not shared: N instances, each with a memory store, admit up to N times
// the limit between them. A fleet that must hold one global limit needs a
// network store (redis, valkey, memcache).
//
// # Decisions
//
// Update holds the lock of the key's shard across the algorithm's step, so a
// read-modify-write of one key is atomic, and a decision on an existing key
// allocates nothing: the step reads and writes the key's own state in place.
// A Limiter's Allow takes a shorter road to the same place: the Store is a
// core.Binder, so the Limiter binds once to its namespace and each decision
// runs the step directly under the shard lock, with no Mutation to pool and
// the namespace hashed once, not per call.
// A Store is safe for concurrent use; distinct keys in distinct shards never
// contend. A decision's time is read by the Limiter before the lock is
// taken, so under contention a decision may come after one made at a later
// time: a step back of the clock, which every algorithm must take in its
// stride (core.Algorithm).
//
// # Keys
//
// The store never keeps the raw identity, which may be attacker-chosen and of
// any length, and it does not compute core.Key.String (SHA-256 costs more
// than a whole in-memory decision). Instead it hashes Namespace and Identity
// with hash/maphash, each under two random seeds of its own drawn when the
// Store is created, and XORs the two into each half of a 128-bit map key
// (hashed apart, so the boundary between them counts: ("a:b", "c") and
// ("a", "b:c") are different keys). That is safe in-process because the seeds
// are secret and never leave the process: an attacker cannot compute which
// identities collide, so a collision is left to chance, about n²/2¹²⁹ for n
// keys (below 10⁻²⁶ for a million). A network store cannot do the same: its
// keys must be the same in every process and across restarts, so no secret
// per-process seed is possible, and anyone who can read the store can see
// them; it uses the SHA-256 of core.Key.String instead.
//
// # Expiry
//
// Each key keeps the absolute expiry that the algorithm's TTL gives it,
// counted from the decision's own time: the Limiter passes the time it read
// from its clock with every update (core.Timed), so a key expires on the
// very time line its algorithm computed the TTL on, and the decision path
// reads no clock of its own. Once it has expired a key reads as absent: the
// algorithm sees a fresh state. A background sweeper deletes expired keys
// every Options.SweepInterval, one shard at a time, so it never holds more
// than one shard's lock; Sweep does the same on demand. Sweeps, Len, and
// updates that carry no time read Options.Clock, which must therefore be the
// clock of the Limiters that use the store (both default to the system
// clock); a sweeper whose clock ran ahead of the Limiters' would delete keys
// that are still live for them.
//
// # Bound
//
// At most Options.MaxKeys keys are held, each shard holding its share. When a
// new key arrives at a full shard, the store first deletes that shard's
// expired keys. If the shard is still full, the new key is refused with
// ErrFull, which matches core.ErrUnavailable, so the Limiter's failure policy
// decides: with core.FailClosed a new identity is refused while the store is
// full. A live key is never evicted to make room, because evicting an active
// counter would let a flood of fresh identities reset a victim's limit. Keys
// already held keep deciding normally while the store is full.
//
// # Memory
//
// Each shard is an open-addressing hash table of 64-byte slots that doubles
// when it is 3/4 full, so a key takes 85 to 170 bytes. A state of up to 31 bytes (every
// rate algorithm's) lives inside its slot; a longer one (a sliding log, many
// leases) lives on the heap. A sweep that leaves a table less than 1/8 full
// shrinks it, so the memory a flood of keys took comes back.
//
// Close stops the sweeper and waits for it; after Close every call returns
// ErrClosed.
package memory
