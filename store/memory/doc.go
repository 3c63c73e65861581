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
// One exception: a state that grows past a slot's 19 bytes (a sliding log's
// third entry in a window, a concurrency limit's third lease) is allocated
// then, once, and kept beside the table while it stays that long.
// A Limiter's Allow takes a shorter road to the same place: the Store is a
// inproc.Binder, so the Limiter binds once to its namespace and each decision
// runs the step directly under the shard lock, with no Mutation to pool and
// the namespace hashed once, not per call. On that road the steps of
// package algorithm's six algorithms are called directly, by their types,
// and any other algorithm through core.Algorithm: a call through the
// interface goes by the method's wrapper and copies the Decision once more,
// about 4.5 ns of a 75 ns decision (which is why this package imports
// algorithm).
// A Store is safe for concurrent use; distinct keys in distinct shards never
// contend. A Limiter without a Clock of its own reads a decision's time
// before the lock is taken, so under contention a decision may come after
// one made at a later time: a step back of the clock, which every
// algorithm must take in its stride (core.Algorithm). A Limiter with a
// Clock clamps what it reads for clock skew, and the clamp would take that
// step back for a clock behind and give units out again; so its time is
// read under the lock (TakeFieldsClocked), as every Update's is (the
// Limiter's and the Multi's mutations read their clocks again there:
// inproc.Retimer).
//
// # Keys
//
// The store never keeps the raw identity, which may be attacker-chosen and of
// any length, and it does not compute store.Key.String (SHA-256 costs more
// than a whole in-memory decision). Instead it hashes Namespace and Identity
// with hash/maphash, each under two random seeds of its own drawn when the
// Store is created, and XORs the two into each half of a 128-bit hash
// (hashed apart, so the boundary between them counts: ("a:b", "c") and
// ("a", "b:c") are different keys). The low bits of one half pick the shard;
// a slot keeps the other 96 bits (the other half, which also picks the
// slot, and the high 32 bits of the first). That is safe in-process because
// the seeds are secret and never leave the process: an attacker cannot
// compute which identities collide, so a collision is left to chance, two
// keys of one shard agreeing on all 96 bits: about n²/2⁹⁷ for n keys (below
// 10⁻¹⁷ for a million). A network store cannot do the same: its
// keys must be the same in every process and across restarts, so no secret
// per-process seed is possible, and anyone who can read the store can see
// them; it uses the SHA-256 of store.Key.String instead.
//
// # Expiry
//
// Each key keeps the absolute expiry that the algorithm's TTL gives it,
// counted from the decision's own time: the Limiter passes the time it read
// from its clock with every update (inproc.Timed), so a key expires on the
// very time line its algorithm computed the TTL on, and the decision path
// reads no clock of its own. Once it has expired a key reads as absent: the
// algorithm sees a fresh state. Each new key reclaims the expired keys
// among a few slots of its shard's table (see Bound), and a background sweeper
// deletes every expired key every Options.SweepInterval, one shard at a
// time, so it never holds more than one shard's lock; Sweep does the same
// on demand. Sweeps, Len, and
// updates that carry no time read Options.Clock, which must therefore be the
// clock of the Limiters that use the store (both default to the system
// clock); a sweeper whose clock ran ahead of the Limiters' would delete keys
// that are still live for them.
//
// # Bound
//
// At most Options.MaxKeys keys are held, each shard holding its share. A
// full store never refuses a new key, and never hands one to the Limiter's
// failure policy: refusing would either lift the limit for every newcomer
// (core.FailOpen admits what the store cannot decide) or deny every
// newcomer (core.FailClosed), which a flood of fresh identities could
// cause at will. Instead, when a new key arrives at a full shard, the shard
// evicts one key: of a few keys (five) sampled from a clock hand that goes
// round its table, the one that expires first, as Redis's approximated
// eviction samples a few keys rather than scanning them all. An expired key
// sampled is simply reclaimed. Evictions counts the live keys evicted.
//
// What an eviction costs: an evicted key reads as absent, so its identity
// starts fresh, and each eviction of a live key can admit up to one more
// quota. The key that expires first is the one with the least to lose:
// every algorithm's TTL is the time until its state would read as fresh
// anyway, so under GCRA and the buckets a drained key, whose TTL is
// longest, outlives the fresh keys of a flood. The other algorithms give
// keys of one moment the same expiry whatever they hold (a fixed window or
// sliding counter: the window's end; a sliding log: a window after its
// last admission), and choose among them by chance. Evictions stay rare while MaxKeys is well
// above the live keys (each shard holds MaxKeys/Shards); a non-zero
// Evictions says that it is not.
//
// The work a new key costs is bounded, whatever the store holds: the
// eviction looks at up to 20 slots, and each new key also reclaims the
// expired keys among the next 8 slots of the hand (while the table holds
// any), so no decision scans a shard.
//
// # Memory
//
// Each shard is an open-addressing hash table of 40-byte slots that holds
// no pointer, so the garbage collector never scans it. It grows by half when
// it is 3/4 full, so growth leaves it at least half full and a key takes 53
// to 80 bytes of heap (BenchmarkHeapPerKey in the bench module measures it,
// and the peers' figures, at 100,000 keys). A state of up to 19 bytes
// (every O(1) algorithm's: GCRA's, the token bucket's and the leaky
// bucket's 9, a fixed window's 13, a sliding counter's 17) lives inside its
// slot; a longer one (a sliding log, many leases) lives in a map of its
// shard, by key.
//
// Besides its table, each shard has one slot of its own, on the cache line
// of its lock: a new key takes it when it is free (empty, or its key has
// expired) and keeps it while it lives. A hot key is then usually there, so
// a decision on it touches the lock's line alone, and cores that contend for
// it pass one cache line between them, not two; and in a stream of keys
// that live shorter than the gap between two decisions in their shard, each
// new key takes that slot with no work on the table.
//
// A refusal of that key takes no lock at all. A refusal writes nothing, so
// the first one, made under the lock, leaves a copy of the key's state on a
// cache line of its own (a seqlock), and the refusals after it are decided
// from the copy by the algorithm's own step (inproc.Peeker: GCRA, the token
// bucket, the fixed window, the leaky bucket, the sliding counter and the
// calendar quota), each core on its own, with nothing written: a flood on
// one exhausted key no longer queues every core on one lock. Whatever
// changes or drops the key (an admission, a write through Update, Delete,
// expiry, eviction, Close) withdraws the copy under the lock first, and a
// step on the copy that would write (the key admits again) is made again
// under the lock, so every decision is still the one the locked step makes.
//
// Memory follows the live keys, not MaxKeys: the expired keys that the hand
// reclaims as new keys arrive (and the sweeper's passes) leave a table that
// shrinks, in amortized O(1) work, when it is less than 1/8 full. A table
// that new keys leave empty keeps its 8 slots until a sweep drops it, so a
// shard whose keys all expire between two decisions (a limit of a billion an
// hour lets a key live 3.6 µs) does not allocate a table per decision. In a
// stream of short-lived identities the expired entries held are a fraction
// of the live ones (measured with no sweeper: 1,000 live keys of 50,000 new
// a second took at most 1,150 entries and 1,816 slots, 71 KB, over 4
// shards; 1,365 entries and 2,506 slots over the default 256, whose tables
// are small; TestMemoryFollowsLiveKeys checks it).
//
// Close stops the sweeper and waits for it; after Close every call returns
// ErrClosed.
package memory
