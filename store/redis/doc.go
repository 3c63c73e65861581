// Package redis keeps Sluice's state in Redis through go-redis v9
// (github.com/redis/go-redis/v9): one script per decision, never sent
// twice.
//
//	rdb := goredis.NewClient(&goredis.Options{Addr: "localhost:6379"})
//	store := redis.New(rdb, nil)
//	defer store.Close()
//	lim, err := core.New(core.Config{Policy: p, Algorithm: algorithm.GCRA{}, Store: store})
//
// # Clients
//
// New takes any goredis.UniversalClient: a *goredis.Client for one server,
// the *goredis.Client that goredis.NewFailoverClient returns for a
// sentinel-managed primary, a *goredis.ClusterClient (goredis.NewClusterClient,
// or NewFailoverClusterClient), or a *goredis.Ring. For Sentinel, NewFailover,
// which takes the goredis.FailoverOptions, is better (see Sentinel below).
// Neither fails; a nil client gives a store whose every call fails with
// core.ErrUnavailable.
//
// # Never twice
//
// A limiter script that runs twice counts one request twice. go-redis
// re-sends a command whose reply it did not get: a Client or a Ring up to
// MaxRetries times (3 by default) after a read timeout, an EOF or a reset
// connection, when the first copy may well have run; a pipeline is re-sent
// whole. A ClusterClient re-sends on the same errors inside the loop that
// follows MOVED and ASK (MaxRedirects, 3 by default), and its pipelines
// re-queue every command of a node whose connection broke, including those
// whose replies had been read.
//
// So for the four client types above the store sends through a client of
// its own, built by New from a copy of the caller's options with retries
// off (MaxRetries -1; on a cluster also MaxRedirects -1) and the context's
// deadline honoured (ContextTimeoutEnabled; a ReadTimeout or WriteTimeout
// of -2, which turns deadlines off, becomes -1). It keeps the address,
// credentials, TLS, dialer (the sentinel's, for a failover client), pool
// sizes and timeouts; it drops client-side caching, and on a cluster the
// replica reads (ReadOnly, RouteByLatency, RouteRandomly), as the store's
// reads feed its writes. A caller's client already configured that way is
// used as it is, sharing its pool. Client returns the client in use: add
// hooks (tracing, metrics) there, as hooks of the caller's client do not
// see the store's own. Close closes the store's own client only. Any other
// UniversalClient is used as it is: the guarantees then rest on it.
//
// The store itself sends a command again only after a reply that proves it
// did not run: NOSCRIPT (then as EVAL), and on a cluster MOVED and ASK,
// which the store follows to the node they name (after ASKING for ASK),
// at most four times in all. A script whose outcome is unknown is never
// sent again: its caller gets an error matching core.ErrOutcomeUnknown.
//
// # Sentinel
//
// When Sentinel promotes a replica, the old primary goes on accepting
// writes until Sentinel demotes it, seconds later, and then discards them:
// decisions written there are lost, and the fleet would admit them again. A
// failover client closes its connections to the old primary as soon as the
// sentinel announces the new one, but only its own: a client the store
// builds from a copy of a failover client's options shares its dialer, not
// that hook. So NewFailover, which takes the goredis.FailoverOptions and
// builds a failover client of the store's own, is the way to use Sentinel;
// given a failover client, New keeps its connections at most a second old,
// so that they move to the new primary within that second. NewFailover's
// are kept at most a second old too: the hook closes the connections in
// the pool when the announcement comes, not one still in its handshake
// with a primary that froze (SIGSTOP, a stalled VM) and answers it when
// it wakes, after the announcement. Measured with a primary frozen for
// 4 s under load from four processes: writes to it stopped 1.9–2.1 s
// after its waking (the connection's second counts from its handshake),
// where they had gone on until Sentinel demoted it, some 10 s later.
// Decisions written there are lost, as those of the moment before the
// announcement. The recycling costs a dial, and the sentinel query of
// the failover client's dialer, a second per connection in use. A failover
// client already configured with MaxRetries -1 and ContextTimeoutEnabled is
// used as it is, hook included. (Writes in the moment between the promotion
// and the announcement can still be lost, with any client: Redis
// replication is asynchronous.) The store's tests fail a real primary over
// with a real Sentinel and check that decisions reach the new primary
// within those bounds, carrying the state the old one had.
//
// # Scripts
//
// RunScript (store.ScriptRunner) runs an algorithm's Lua twin (package
// algorithm) in one round trip: EVALSHA with the script's hash, KEYS[1] the
// key, ARGV as store.ScriptArgs documents (the lease id in decimal), and a
// reply of six integers. The script cache is lost when a server restarts,
// fails over or runs SCRIPT FLUSH; the store then sends the source with
// EVAL, which also caches it again, so NOSCRIPT never reaches a caller.
//
// When store.ScriptArgs.Now is 0 (a Limiter without a Clock), the script
// reads the server's TIME, so that instances with skewed clocks agree;
// otherwise it decides at the Now it is given.
//
// # Generic path
//
// Update (store.Store) serves algorithms without a Lua twin, and Limiters
// with core.Config.NoScript: GET, the algorithm's step in Go, then a
// compare-and-set, driven by store.CASUpdate with Options.Retry. A key that
// was absent is written with SET NX PX; one that held a value with a small
// script of the store's own that sets the new value, with PX, only if the
// key still holds exactly the value read. Under contention the loop retries
// with jittered backoff and gives up with core.ErrContention. A lost
// compare-and-set is never sent again either. Each instance's clock decides
// there while Redis expires keys by its own, so every TTL is lengthened by
// Options.ClockSkew (DefaultClockSkew, one second, as in store/valkey).
//
// # Keys and clusters
//
// Keys are store.Key.String(): "<prefix>:<policy>:{<hash>}", where the hash
// of the identity sits in a Redis Cluster hash tag, so every key of one
// identity lands in one slot, and every script touches one key.
//
// # Batching
//
// go-redis pays a round trip per goroutine and a connection per round trip
// in flight. The store's batcher coalesces concurrent script calls into
// pipelines, one batcher per node (per master on a cluster, by the key's
// slot). A call that finds fewer than Options.Pipelines round trips (by
// default twice GOMAXPROCS, and never more than the node's connections) in
// flight to its node takes one and is sent at once, alone, from its own
// goroutine and under its own context: alone, a caller pays nothing for the
// batcher. A call that finds them all busy queues; when a round trip ends,
// the queued calls, up to Options.MaxBatch, go out together in one pipeline,
// sent by a goroutine of the batcher. So the batcher follows the load: a
// few concurrent callers each have a round trip of their own, as with a
// pooled client, and many share pipelines that fill as they arrive, which
// costs the server one read for many decisions. Each call still waits under its own
// context and leaves at its own deadline: before its pipeline was sent,
// with an error that says nothing ran; after, with core.ErrOutcomeUnknown.
// A pipeline whose replies are lost fails every call in it with
// core.ErrOutcomeUnknown, and is never sent again. Options.NoBatch turns
// the batcher off. go-redis sends pipelines on a pool of their own
// (PipelinePoolSize, beside PoolSize), so the store may hold up to both
// pools' connections to a node; a PipelinePoolSize of -1 (storeurl's
// pipeline_pool_size=-1) keeps it to PoolSize.
//
// # Errors
//
// A denial is a Decision, never an error. Every error the store returns is
// a *store.Error, so it matches core.ErrUnavailable, which the Limiter's
// failure policy turns into a fail-closed error, a fail-open admission or a
// fallback decision. Each error falls in one of three classes, by what is
// known of its command:
//
//   - Not sent: a refused or failed dial, an exhausted pool
//     (goredis.ErrPoolTimeout, ErrPoolExhausted), a closed client or store,
//     a deadline met while queued in the batcher, and a bare context error,
//     which go-redis (v9.23, read in its source) returns only while a
//     command waits for a pool turn or for a connection being dialled in
//     the background; during an outage that is how a call ends, at its
//     deadline, after go-redis's own dial retries.
//   - Rejected before writing: an error reply that refuses the command
//     (NOSCRIPT, MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN,
//     BUSY, NOAUTH, WRONGPASS, NOPERM, READONLY, OOM, MISCONF, NOREPLICAS),
//     and OOM, READONLY, MISCONF or NOREPLICAS raised inside a script:
//     Redis checks those for a script's write only while the script has
//     written nothing, so the script changed nothing.
//   - Unknown: the command was sent and its reply is lost (a timeout, a
//     broken connection, a failed write, which in a pipeline may still
//     have carried whole commands), or any other error raised inside a
//     script, which may come after it wrote. Only these match
//     core.ErrOutcomeUnknown; the Limiter never sends them again, and
//     releases the lease of an Acquire among them (see core.Limiter.Acquire).
//     One error of this class was in fact not sent: a deadline met while a
//     connection dialled for the call waits for the reply to its handshake
//     (HELLO, AUTH, SELECT) from a stalled server. go-redis returns it as it
//     returns a lost reply, a read timeout on the connection, so the store
//     cannot tell it apart, and errs on the safe side.
//
// The generic path adds core.ErrContention, and a failed GET, which changed
// nothing. Every call returns by its context's deadline.
//
// # Eviction
//
// Under any maxmemory-policy but noeviction, Redis evicts keys when memory
// runs short, limiter keys included (volatile-* policies too: every limiter
// key has a TTL). An evicted key reads as absent, so its identity starts
// afresh: each eviction of a live key can admit up to one more quota. Under
// noeviction a full server refuses writes instead, with OOM, which the
// store reports as rejected: the failure policy decides, nothing is
// counted twice. Store.Check reads the policy of every server behind the
// store (CONFIG GET maxmemory-policy) and returns a *core.EvictionWarning,
// matching core.ErrEvictable, for each that may evict, or whose policy it
// cannot read (CONFIG renamed or forbidden: Policy "unknown"; the store
// decides as usual). With Options.OnWarning set, the store runs that check
// by itself when it is built, when its own client opens a new connection
// (at most every 10 s) and every minute, never per decision, and hands
// each warning to OnWarning. Give Redis room (about 100 bytes per live key
// of the fixed-size algorithms, see the README), run it with noeviction,
// or watch its evicted_keys statistic.
package redis
