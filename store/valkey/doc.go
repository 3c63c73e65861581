// Package valkey is a Sluice store in Valkey (or Redis) through the
// valkey-go client: each decision is one server-side Lua script, run in one
// round trip, so every instance of a fleet shares one exact limit.
//
//	c, err := valkeygo.NewClient(valkeygo.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
//	...
//	lim, err := core.New(core.Config{
//		Policy:    core.PerSecond("api", 100),
//		Algorithm: algorithm.GCRA{},
//		Store:     valkey.New(c, nil),
//	})
//
// The package is tested against redis-server (Debian has no valkey-server
// package; Valkey speaks the same protocol and runs the same Lua), single
// node, a 3-master cluster, and a primary behind a real Sentinel through
// valkey-go's ClientOption.Sentinel (the store uses that client as it is,
// so following a switch of primary is valkey-go's; the suite does not fail
// that primary over).
//
// # Clients
//
// New takes any valkeygo.Client: a single node, a cluster (valkey-go
// discovers the slots and follows MOVED and ASK), sentinel, or a standalone
// primary with replicas, built without ClientOption.ConnLifetime (see
// below). Every command the store sends writes, or reads for a write (GET
// before a compare-and-set), so a ClientOption.SendToReplicas must route
// none of EVALSHA, EVAL, GET or SET to a replica. A Store from New does not
// own the client: Close leaves it open for the caller to close. Open builds
// the client from a valkeygo.ClientOption, and its Store's Close closes it.
//
// valkey-go pipelines concurrent commands on one connection per node
// (ClientOption.PipelineMultiplex) by itself, which is the fastest way to
// reach the server's own limit: there is no pool to size, and a Store, like
// its client, is meant to be shared by every limiter of a process. Its
// pipeline passes each command through a writer and a reader goroutine,
// though, which a few callers at once pay for (at 4 goroutines it ran at
// 0.6–0.9 of go-redis's pooled connections). So over a standalone client
// the store keeps up to 2 × GOMAXPROCS dedicated connections of its own
// (Client.Dedicate, dialled and replaced in the background, never by a
// caller): while no more scripts than that are in flight, each goes down
// one of them, written and read by its caller; beyond that, they share a
// pipeline. (So does a script whose context can be cancelled before its
// deadline, an HTTP request's through a Limiter: a dedicated connection's
// socket sees only the deadline, and the pipeline returns at the
// cancellation.) That pipeline is the store's own too: as many dedicated
// connections as valkey-go's shared ones (2 at 2 cores, 4 from 4 on; 2
// also at 1 core, where valkey-go keeps 1), each
// carrying many callers' commands at once as valkey-go's do, each command
// on one at random; valkey-go's shared connections carry a standalone
// client's commands only while none of the store's is up. A process so
// holds that many connections more per server. And the pipeline's writer
// flushes whenever it finds no command waiting, which
// under many callers is once or twice a command (write syscalls were 73%
// of the client's CPU at 64 goroutines); so from 8 × that many scripts in
// flight (32 at 2 cores), the next ones wait for a batch, sent as one
// DoMulti while the last one is out (at most two out at a time, 64
// commands each). A script whose deadline ends while it waits for a batch
// was never sent: its error is not an unknown outcome. A sentinel client
// has the batches but no dedicated connections (one would outlive a
// failover); a cluster client has neither, and pipelines one command at a
// time (a batch would wait for its slowest node).
//
// # Scripts
//
// RunScript sends EVALSHA with the algorithm's script hash, and EVAL with
// its source only when the server answers NOSCRIPT (after a restart, a
// failover or SCRIPT FLUSH), which means the script did not run; the EVAL
// also puts the script back in that node's cache. A caller never sees
// NOSCRIPT. Arguments follow store.ScriptArgs; the lease id travels as
// decimal text. With ScriptArgs.Now zero (a Limiter without a Clock) the
// script reads the server's TIME, so instances with skewed clocks agree.
//
// The store builds its EVALSHA and EVAL commands itself instead of using
// valkey-go's Lua helper: store.Script already carries the hash, the
// policy's arguments are formatted once per policy and reused, and the
// store decides what each error means between the two commands. (The
// helper would behave the same on retries when made with NewLuaScript; one
// made with NewLuaScriptRetryable would resend a script whose reply was
// lost, which a rate limiter must never do.)
//
// # Deadlines and unknown outcomes
//
// Each error falls in one of three classes, by what is known of its command.
// Not sent: a failed or refused dial (valkey-go dials when a command needs a
// connection, so during an outage each call fails at once with the
// *net.OpError), a closed store, a context already ended. Rejected before
// writing: an error reply the server sends before running anything (OOM,
// READONLY, BUSY, MOVED past the redirect limit, ...), and OOM, READONLY,
// MISCONF or NOREPLICAS raised inside a script, which Redis and Valkey check
// for a script's write only while it has written nothing. Unknown:
// everything else. A call ends at its context's deadline, its own and never
// another's: on a pipelined connection the store hides the deadline from
// valkey-go and lets the context's end abort the call, since valkey-go,
// sending a command synchronously on an idle connection with the socket's
// deadline set to the command's, closes the connection when that deadline
// passes and fails every command queued behind it then (a dedicated
// connection, one command at a time, keeps the deadline on its socket). No
// call dials: valkey-go dials its broken shared connection again inside the
// next command that needs it, waiting for the new connection's handshake for
// its dialer's timeout (5 s by default) whatever that command's deadline, so
// the store's own connections are dialled and replaced in the background,
// and a command on valkey-go's shared connection (a sentinel or cluster
// client's, or a standalone client's while the store's are being replaced)
// runs on a goroutine of its own, which the caller leaves at its deadline.
// The server may already have run the script: valkey-go returns "context
// deadline exceeded" for a reply that did not arrive in time (it turns a
// socket deadline into a bare context error, so such an error proves
// nothing), and a command still queued on the connection when its context
// ends may yet be sent. Such an error, and any other client-side error after
// the command may have gone out (a cancelled context, a broken or closing
// connection), matches core.ErrOutcomeUnknown as well as
// core.ErrUnavailable: the Limiter hands it to its failure policy, never
// sends the script again for the same decision, and releases the lease of an
// Acquire among them (see core.Limiter.Acquire). The same holds for any
// other Lua runtime error (it may come after the script wrote) and a reply
// that is not six integers. The first call after a server went away may
// still go out on a dead connection and is unknown. The store then drops the
// other idle connections of its own, which died with the server, so that
// after it at most one call for each of the pipelined connections (the
// store's own, 2 at 2 cores and 4 from 4 on, as above; valkey-go's, by
// ClientOption.PipelineMultiplex, when the store has none up) meets a dead
// one; the calls after those meet the refused dial.
//
// A connection that goes silent while its server lives (a NAT or conntrack
// entry lost, a virtual IP moved) is another matter: no dial is refused,
// and valkey-go closes such a connection only when a reply is
// ClientOption.ConnWriteTimeout late (its default, ten Dialer.KeepAlive
// periods, is 10 s). Until then every call that goes out on it is
// unknown: on a cluster client's connection to the node, and on a
// standalone client's beyond the store's own connections, calls failed
// for 12 s in a test from outside. Set ConnWriteTimeout to about a second
// (storeurl's valkey URLs do, unless their write_timeout says otherwise):
// calls then decided again within about 3 s.
//
// valkey-go itself never resends a script, as read in its v1.0.79 source:
//
//   - Do retries after a network error only commands marked retryable:
//     read-only ones (GET) and those built with ToRetryable. EVALSHA, EVAL
//     and SET are writes and are not marked, so ClientOption.DisableRetry
//     changes nothing for them (it only stops GET retries, which are safe).
//     DoMulti retries a batch only when every command in it is retryable;
//     the store sends each command alone, with Do.
//   - The cluster client resends a command on MOVED and ASK, and retries
//     retryable commands on TRYAGAIN, CLUSTERDOWN and LOADING. A redirect is
//     the server refusing a command it did not run, so following it sends
//     the script once; a NOSCRIPT from the new node falls back to EVAL as
//     above. The standalone client's REDIRECT handling is the same.
//   - The one exception is ClientOption.ConnLifetime: valkey-go resends any
//     command, writes included, that fails with its internal "connection is
//     expired" error (singleClient.Do: `if err == errConnExpired { goto
//     retry }`, and likewise in its cluster and sentinel clients), which a
//     command in flight on a connection whose lifetime ran out gets when the
//     server stays silent for a second. The package's tests show a script
//     run twice that way, with no error to its caller. So the store refuses
//     such a client: Open rejects an option with ConnLifetime set, and New
//     gives a store whose every call fails with an error that says so (it
//     reads the setting from valkey-go's single, cluster, sentinel and
//     standalone clients; a wrapper of another type is taken as it is).
//
// The package's tests hold both to this, behind a proxy that delivers
// requests but withholds replies: a call returns at its deadline with an
// unknown outcome and the server counts exactly one run; and when the
// connection then breaks, long before the deadline, valkey-go does not send
// the script again on a new connection (as it would a retryable command).
//
// # Cluster
//
// A store key is "<prefix>:<policy>:{<hash>}" (store.Key.String): the braces
// are a hash tag, so all keys of one identity share a slot. Every command
// the store sends names one key, so it is never cross-slot, which
// valkey-go's cluster client refuses.
//
// # Generic path
//
// Algorithms without a Lua twin, and limiters with core.Config.NoScript,
// use Update: GET, the algorithm's Go step, then a compare-and-set, driven
// by store.CASUpdate with Options.Retry. The compare-and-set is the store's
// own small script ("if GET still returns what was read, SET PX") or, for
// an absent key, SET NX PX. TTLs are rounded up to whole milliseconds. Here
// the Limiter's clock decides, not the server's. (Valkey 8.1's SET IFEQ
// would do without the script; Redis has no such option.)
//
// # Eviction
//
// Under any maxmemory-policy but noeviction, the server evicts keys when
// memory runs short, limiter keys included (volatile-* policies too: every
// limiter key has a TTL). An evicted key reads as absent, so its identity
// starts afresh: each eviction of a live key can admit up to one more
// quota. Under noeviction a full server refuses writes with OOM instead,
// which the store reports as rejected. Store.Check reads the policy of
// every node the client knows (CONFIG GET maxmemory-policy) and returns a
// *core.EvictionWarning, matching core.ErrEvictable, for each that may
// evict or whose policy it cannot read (CONFIG renamed or forbidden: Policy
// "unknown"; the store decides as usual). With Options.OnWarning set, the
// store runs that check by itself when it is built and every minute, never
// per decision, and hands each warning to OnWarning (valkey-go has no hook
// on a new connection, so a reconnect waits for the next minute).
//
// # Errors
//
// Every error is a *store.Error and matches core.ErrUnavailable; it
// also matches core.ErrOutcomeUnknown as described above, and
// core.ErrContention (a *store.ContentionError inside) when the generic
// path's compare-and-set lost every attempt. A denial is never an error.
package valkey
