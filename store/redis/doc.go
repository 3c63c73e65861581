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
// so that they move to the new primary within that second. A failover
// client already configured with MaxRetries -1 and ContextTimeoutEnabled is
// used as it is, hook included. (Writes in the moment between the promotion
// and the announcement can still be lost, with any client: Redis
// replication is asynchronous.) The store's tests fail a real primary over
// with a real Sentinel and check that decisions reach the new primary
// within those bounds, carrying the state the old one had.
//
// # Scripts
//
// RunScript (core.ScriptRunner) runs an algorithm's Lua twin (package
// algorithm) in one round trip: EVALSHA with the script's hash, KEYS[1] the
// key, ARGV as core.ScriptArgs documents (the lease id in decimal), and a
// reply of six integers. The script cache is lost when a server restarts,
// fails over or runs SCRIPT FLUSH; the store then sends the source with
// EVAL, which also caches it again, so NOSCRIPT never reaches a caller.
//
// When core.ScriptArgs.Now is 0 (a Limiter without a Clock), the script
// reads the server's TIME, so that instances with skewed clocks agree;
// otherwise it decides at the Now it is given.
//
// # Generic path
//
// Update (core.Store) serves algorithms without a Lua twin, and Limiters
// with core.Config.NoScript: GET, the algorithm's step in Go, then a
// compare-and-set, driven by core.CASUpdate with Options.Retry. A key that
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
// Keys are core.Key.String(): "<prefix>:<policy>:{<hash>}", where the hash
// of the identity sits in a Redis Cluster hash tag, so every key of one
// identity lands in one slot, and every script touches one key.
//
// # Batching
//
// go-redis pays a round trip per goroutine and a connection per round trip
// in flight. The store's batcher coalesces concurrent script calls into
// pipelines, one batcher per node (per master on a cluster, by the key's
// slot). A call that finds fewer than Options.Pipelines round trips in
// flight to its node takes one and is sent at once, alone, from its own
// goroutine and under its own context: alone, a caller pays nothing for the
// batcher. A call that finds them all busy queues; when a round trip ends,
// the queued calls, up to Options.MaxBatch, go out together in one pipeline,
// sent by a goroutine of the batcher. Each call still waits under its own
// context and leaves at its own deadline: before its pipeline was sent,
// with an error that says nothing ran; after, with core.ErrOutcomeUnknown.
// A pipeline whose replies are lost fails every call in it with
// core.ErrOutcomeUnknown, and is never sent again. Options.NoBatch turns
// the batcher off.
//
// # Errors
//
// A denial is a Decision, never an error. Every error the store returns is
// a *core.StoreError, so it matches core.ErrUnavailable, which the Limiter's
// failure policy turns into a fail-closed error, a fail-open admission or a
// fallback decision. It also matches core.ErrOutcomeUnknown when the
// command may have run: a timeout, a broken connection or a reply lost
// after the command was sent, or an error raised inside a script. It does
// not when the command provably did not run: a refused connection, an
// exhausted pool, a closed client, a server that refused the command
// (NOSCRIPT, MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN, BUSY,
// NOAUTH, WRONGPASS, NOPERM, READONLY), or a deadline met while queued in
// the batcher. The generic path adds core.ErrContention, and a failed GET,
// which changed nothing. Every call returns by its context's deadline.
package redis
