// Package memcache keeps Sluice's state in memcached, through a
// github.com/bradfitz/gomemcache client over one server or a pool of
// several. Memcached runs no scripts, so every algorithm runs as its pure Go
// step inside a compare-and-swap loop: this store is the proof that the
// store.Store contract needs nothing from the server but gets, cas and add.
//
//	c := gomemcache.New("10.0.0.1:11211", "10.0.0.2:11211")
//	c.Timeout = 100 * time.Millisecond // bounds an abandoned round trip
//	c.MaxIdleConns = 64                 // the requests a process sends at once
//	s := memcache.New(c, &memcache.Options{Servers: []string{"10.0.0.1:11211", "10.0.0.2:11211"}})
//	defer s.Close()
//	l, err := core.New(core.Config{Policy: p, Algorithm: algorithm.GCRA{}, Store: s})
//
// # The compare-and-swap loop
//
// Update runs store.CASUpdate, the loop every CAS store shares, over Load
// (gets: the value and its CAS id; a miss reads as an absent key) and Swap
// (cas with that id, or add when the key was absent). An uncontended
// decision is two round trips, gets then cas (or add); a decision that
// writes nothing, as every algorithm's denial, is one gets. A swap that
// loses (EXISTS: another writer changed the item; NOT_STORED: an add met an
// existing key; NOT_FOUND: the item was deleted, expired or evicted since the
// gets — memcached answers a cas on a missing key so, although gomemcache's
// doc promises ErrNotStored) is a conflict: the loop waits a jittered
// backoff and starts over, and the next gets sees the key as it now is.
// Before each attempt the Limiter's clock is read again (inproc.Retimer), so
// that the write that lands is decided at the time of its own attempt.
//
// Concurrent Updates of one key through one Store take turns in a per-key
// queue in process, in arrival order and each within its own deadline,
// instead of racing each other to the server; conflicts are then only with
// other instances. Measured on loopback (BenchmarkHotKey: 64 goroutines on
// one key through one Store, every call a write, the default 100ms
// deadline): with the queue, no conflicts and no errors at about 12,000
// decisions/s; without it, 2.5 conflicts per decision, 5% of calls past the
// deadline and about 4,400 decisions/s. Through two Stores (TestHotKey),
// the conflicts per update fell from about 1.1 to 0.15 and the longest
// retry streak from 28 to 64 attempts to about 12. Options.NoLocalQueue
// turns the queue off.
//
// The loop makes at most Options.Retry.MaxAttempts attempts (DefaultRetry:
// 64, backoff 100µs doubling to 5ms) and then gives up with a
// *store.ContentionError. With the queue, no measured update came near that
// bound: the Limiter's deadline is what ends a call that waits too long.
// Stats reports the retry distribution, conflicts and abandoned round trips.
//
// # Errors
//
// Every error Update and Delete return is a *store.Error and matches
// core.ErrUnavailable, so the Limiter's failure policy decides: a network or
// server error, the caller's context (also while queued or backing off),
// exhausted retries (also core.ErrContention), ErrClosed, ErrNoClient. A
// cas or add whose reply never came (a broken connection, a timeout, or the
// caller's deadline while it was in flight) may still have been stored:
// that error also matches core.ErrOutcomeUnknown, and is never retried.
// Only errors raised before anything was sent (a failed dial, no server)
// are known not to have written.
//
// # Deadlines
//
// gomemcache takes no context: a call blocks until the server answers or
// the client's Timeout passes on the socket. The Store checks the context
// before each round trip and runs each round trip on a goroutine that it
// stops waiting for when the context ends, so a stalled server never holds
// a request past its deadline (plus scheduling delay). The abandoned round
// trip runs on until the server answers or the client's Timeout closes its
// connection, so no goroutine outlives the client's Timeout; Close waits for
// them. An abandoned cas or add that lands later is counted in
// Stats.LateWrites: its caller was told the outcome is unknown. A context
// that can never end (no deadline, no cancel) needs no goroutine: the client's
// Timeout bounds the call alone. Set the client's Timeout near the
// Limiter's (core.DefaultTimeout): it bounds how long an abandoned round
// trip holds a goroutine and a connection, and gomemcache's default is 500ms.
//
// # Time and clock skew
//
// Memcached has no script, so no server clock decides: each decision is
// made at the now of the Limiter that makes it. Every algorithm reads a now
// earlier than one the key has already seen as standing still at the later
// one (GCRA and the leaky bucket judge at the earlier now, which is
// stricter), so the decisions
// of a key lie on one time line. When the clocks of the instances sharing a
// key disagree by at most s, the requests made during any real interval of
// length d are decided at nows spread over at most d + s, and each
// algorithm's bound, stated over nows, holds over that longer interval:
//
//   - token bucket, GCRA: at most B + ⌊(d + s)/T⌋ units, so at most
//     ⌈s/T⌉ = ⌈s·Limit/Window⌉ more than with one clock: what the rate earns
//     in s, once, not per interval.
//   - leaky bucket: at most B + ⌊(d + s + MaxDelay)/T⌋: again ⌈s·Limit/Window⌉
//     more.
//   - fixed window and sliding counter: at most Limit in every aligned
//     window of the time line, whose edges real time sees up to s early or
//     late, so a real interval can meet one window more than with one
//     clock: at most one Limit more.
//   - sliding log: at most Limit in every real interval of length W − s
//     (instead of W).
//   - concurrency: a lease is reclaimed LeaseTTL after its Acquire by the
//     clock of whoever reads it, so up to s early: in flight never exceeds
//     Limit as long as holders release within LeaseTTL − s.
//
// An early expiry would cost more (a counter read as fresh while an instance
// behind still counts on it), so every TTL is lengthened by
// Options.ClockSkew (default one second). The conformance suite runs this
// store with Capabilities.ClockSkew of one second: half of a fleet a second
// ahead of the other half, and no more admitted than the algorithm admits at
// those two instants.
//
// An instance whose clock is off by more than ClockSkew cannot hold the
// fleet in its future: the Store declares its skew (store.ClockSkewer), and a
// Limiter clamps every stored time more than ClockSkew beyond what a step at
// its now could write back to that bound (core.Clamper), and writes the
// clamped state. Before, one limiter an hour ahead that admitted once left
// the correct instances 4 of 20 under "5 per minute", told to retry in an
// hour; now they have their quota back within ClockSkew plus the time the
// policy needs to recover from a full drain. What a fleet with one instance
// off by X costs each algorithm is in its type's doc (package algorithm).
//
// # TTLs
//
// Memcached counts expirations in whole seconds, and its clock ticks once a
// second, so an item sent with expiration 1 can vanish a moment later. A
// state's TTL, plus Options.ClockSkew, is rounded up to whole seconds (at
// least one) and one more second is added: a state lives at least its TTL
// plus the skew, and at most two seconds more; 0, which memcached reads as
// "never", is never sent. A TTL longer than 30 days (MaxRelativeExpiration;
// memcached reads a larger number as a Unix time, so a relative 30 days and
// a second would expire at once) is sent as an absolute Unix time on
// memcached's own clock, never the process's (a process clock 31 days
// behind once wrote every such state already expired, and "2 per 30 days"
// admitted 10 of 10): the Store reads the "time" of the stats of each
// server in Options.Servers, on a connection of its own, first when such a
// TTL is needed and again in the background once a reading is a minute
// old, extrapolates it by the monotonic clock, and takes the latest over the
// servers (an item on a server whose clock is behind lives that much
// longer). The expiry is an hour late, for a server clock stepped ahead
// between readings, and capped at January 2038, the most the field holds.
// Without Options.Servers (gomemcache does not expose its servers) such a
// TTL is sent as 30 days. Bucket states of a valid policy live at most about
// 407 days (core.MaxHorizon).
//
// # Keys
//
// Memcached takes keys of at most 250 bytes (MaxKeyLen) with no space or
// control character. The key is store.Key.String(),
// "<prefix>:<policy>:{<16 base64url>}", when it fits, as it does for any
// prefix of up to 166 bytes of printable characters (core.New accepts at
// most 64). Otherwise (a longer prefix, or
// one with a space, a control character or DEL) the namespace
// "<prefix>:<policy>" is replaced by "#" and 24 hex digits of its SHA-256,
// instead of failing every call: under core.FailOpen a refused key would
// silently lift the limit. Every instance derives the same key, and two
// namespaces never share one. Key returns the key for a store.Key.
//
// # State
//
// The item's value is the algorithm's state exactly as its Go step wrote it:
// compact, versioned binary (a version byte, then fixed-width integers), 9
// to 17 bytes for the bucket and window algorithms, up to 80 KB for the
// sliding log and 160 KB for the concurrency algorithm at their largest
// Limit, below memcached's default 1 MB item limit (each gets and cas then
// carries that much). A core.Multi keeps every limit's state of an identity
// in one item, the sum of theirs, which can pass that limit (fourteen
// sliding logs of 10,000 do); memcached answers such a write SERVER_ERROR
// and stores nothing, and the call fails with an error that is not an
// unknown outcome. The Store neither reads nor converts it: a state of
// another algorithm or layout, or one written by something else, is read by
// the step as absent, so changing a policy's algorithm or upgrading a layout
// resets the keys concerned (they start fresh) rather than misreading them.
// Item flags are always 0.
//
// # Eviction
//
// Memcached may evict any item when it runs out of memory, least recently
// used first within the item's size class. An evicted state reads as
// absent: the next decision starts from a fresh state (the next swap adds
// it), so each eviction of a live key can admit up to one more quota
// (Limit, or Burst for the bucket algorithms) than the limit allows. A hot
// key is read on every decision and so is rarely the victim; keys that are
// idle between requests are. A cas that meets an evicted item is a
// conflict, never an error, so eviction never makes a call fail. Give
// memcached the memory its keys need (about 100 to 150 bytes per key for
// the small states, with memcached's item overhead), and watch its
// "evictions" statistic.
//
// # Pools
//
// Over several servers, gomemcache's ServerList sends each key to one
// server (by a hash of the key), so each key's compare-and-swap happens on
// one server and stays atomic. A key's server fails alone: its keys return
// errors (and the failure policy decides) while the others work. Changing the
// server list moves keys to other servers, where they start fresh: as with
// eviction, up to one quota more per moved live key.
//
// The server is the hash modulo the list's length, taken as a position in
// the list: every instance must give its client the same servers, spelt
// the same way, in the same order, or a key lands on two servers and each
// counts a quota of its own (storeurl sorts a memcache:// URL's servers,
// so that its order does not matter, and refuses one listed twice). It is
// not a consistent hash: going from n servers to n+1 moves about n/(n+1)
// of the keys (two thirds from two to three), and so does losing one from
// the list.
//
// A memcached started with -C (CAS disabled) gives items no CAS id, and
// no cas can succeed: the store reports ErrNoCAS at its first read of an
// existing item.
package memcache
