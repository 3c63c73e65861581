// Package conformance is the suite every Sluice store must pass: the memory,
// Redis, Valkey and Memcached stores, and any store a user writes. A store
// proves itself by calling it from its own test, handing over a harness
// maker:
//
//	type harness struct{ addr string }
//
//	// NewStore returns a client of its own: one instance of a fleet.
//	func (h harness) NewStore(t testing.TB) store.Store {
//		s := mystore.New(mystore.Dial(h.addr), nil)
//		t.Cleanup(func() { s.Close() })
//		return s
//	}
//
//	func (harness) Capabilities() conformance.Capabilities {
//		return conformance.Capabilities{Scripts: true, ClockSkew: time.Second}
//	}
//
//	// addr is the server the suite runs against, e.g. from the environment.
//	func addr(tb testing.TB) string {
//		a := os.Getenv("MYSTORE_ADDR")
//		if a == "" {
//			tb.Skip("MYSTORE_ADDR is not set")
//		}
//		return a
//	}
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) conformance.Harness {
//			return harness{addr: addr(t)}
//		})
//	}
//
//	func BenchmarkConformance(b *testing.B) {
//		conformance.RunBenchmarks(b, func(b *testing.B) conformance.Harness {
//			return harness{addr: addr(b)}
//		})
//	}
//
// The maker is called again for every algorithm on every path, and the
// suite takes three fresh clients from it there, which are torn down (by
// the harness's t.Cleanup) when that subtest ends. Every check uses keys of
// its own, named after the test and a random suffix (hashed, as every
// identity is), so reruns against a live server never meet old state, and
// deletes them at the end when the store can delete.
//
// The harness declares what the store can do (Capabilities) instead of the
// suite guessing: whether it runs scripts, which algorithms it is meant for,
// how far apart its fleet's clocks may be (ClockSkew), or that they cannot
// be apart (OneClock); a harness that says neither fails. A check that does
// not apply runs as a subtest that skips, saying why. A harness that can read the
// backend directly also implements Inspector, which lets the suite check
// that nothing was written, that Reset deleted, and that keys expire, and
// one that can read a key's remaining TTL implements TTLInspector, which
// lets it check that states of a month, the longest window, are kept a
// month.
//
// # Writing a store
//
// What a store implements, and what each word of the contract means (whose
// clock a TTL is on, what "absent" covers, which error says what), is the
// package doc of package store: go doc github.com/sluicehq/sluice/store.
// A complete store to start from, about a hundred lines over a table of
// versioned rows made atomic by store.CASUpdate, with the harness and the
// test that puts it through Run, is this package's example_store_test.go:
//
//  1. Implement store.Store's Update as one atomic read-modify-write of one
//     key (a lock, a conditional write through store.CASUpdate, or one
//     server-side script). Read an expired key as absent, and let a write
//     replace it.
//  2. Lengthen each TTL by the largest clock skew of the fleet when the
//     Limiters' clocks decide (every store but a script on the server's
//     clock), and say so with store.ClockSkewer.
//  3. Return errors that match core.ErrUnavailable, and
//     store.UnknownOutcome only when the write may have happened.
//  4. Add store.Deleter (Reset) and store.Closer if you can; a
//     store.ScriptRunner if your server runs the Lua twins.
//  5. Call Run from your store's test with a Harness that hands out
//     independent clients, declares Capabilities (scripts; a clock skew,
//     or one clock), and, if it can look into the backend, is an Inspector
//     (and a TTLInspector if it can read a key's TTL).
//
// # What Run checks
//
// For every algorithm the harness declares (all seven of package algorithm
// by default), on the generic path (store.Store.Update, or for Allow the
// inproc.Binder fast path of a store that has one, as a Limiter would use it)
// and, when Capabilities.Scripts is set, again on the script path
// (store.ScriptRunner):
//
//   - Admission: 200 concurrent calls for one key, spread over three
//     Limiters on three clients, under a ManualClock stopped at one instant.
//     Every order of identical calls meets the same sequence of decisions,
//     so the store must hand out exactly the decisions of the algorithm's Go
//     step run serially: not one more admitted, not one fewer, the same
//     Remaining, RetryAfter, ResetAfter and Delay (the leaky bucket's queue
//     slots are distinct and within MaxDelay); for the rate algorithms, again
//     with a cost of 3.
//   - AdmissionNoClock: the same as production runs it, with no Clock (the
//     server's clock on the script path, each instance's otherwise) and a
//     30-day window. The count is exact unless the run straddles the edge of
//     an aligned window, or the algorithm judges calls whose clock readings
//     arrive out of order more strictly (GCRA, leaky bucket); it never
//     exceeds what the Go step admits between the run's first and last
//     instant.
//   - AdmissionSkewedFleet (unless Capabilities.OneClock): half the fleet
//     runs ClockSkew ahead; the count never exceeds what the Go step admits
//     for calls at those two instants in any order.
//   - FastClock (the generic path): one instance runs an hour ahead, far
//     beyond any declared skew, and admits once; from the next decision of a
//     correct instance on, the correct instances get their whole quota back
//     within the store's ClockSkew plus the time the policy needs to
//     recover from a full drain (2·Window + Burst·Interval + MaxDelay +
//     LeaseTTL, a few minutes here), never only when real time catches up
//     with the fast clock. A store passes by declaring its skew
//     (store.ClockSkewer), so that the Limiter clamps what it reads
//     (core.Clamper). A store that allows for a skew of an hour or more
//     accepts such a clock, and the check skips, saying so.
//   - InFlight, InFlightNoClock, LeaseReclaim (the concurrency algorithm):
//     workers on every instance Acquire, hold and Release; an atomic count
//     of the leases held never exceeds the limit; released slots are reused;
//     a lease never released is reclaimed at LeaseTTL and not a millisecond
//     before; releasing a reclaimed lease frees nobody else's slot.
//   - Steps: scripted and random sequences (refill, window roll-over, n > 1,
//     n = quota, idle keys past their TTL, a clock that moves backwards) go
//     through two Limiters on the store, alternating, and through the
//     algorithm's Step; every Decision field must be equal. A key idle past
//     the TTL its algorithm gave it must decide as an absent one, since a
//     store may drop it then; the comparison allows for a store that did.
//   - RetryAfter: after a denial, a retry at now+RetryAfter is admitted and
//     one at now+RetryAfter−1ms is not; at now+ResetAfter after an admission
//     the whole quota is back.
//   - BadInput: an empty key, n <= 0, n above the quota and invalid policies
//     are rejected with errors matching core.ErrInvalidInput or
//     core.ErrInvalidPolicy, and nothing is written: the next request meets
//     a fresh key (and, with an Inspector, the key does not exist).
//   - Identities: long, binary and separator-laden identities work and
//     keep states of their own, also pairs a store that rewrites keys would
//     make one (two that differ only in case, in bytes that are not UTF-8,
//     in a space and a '_', in "%41" and "A", or only at their start), and
//     so does one identity under two policies or two prefixes (two
//     namespaces), also when a namespace and an identity join, with ':',
//     "::" or nothing, as another pair does (a prefix may hold a ':', a
//     name a '-'), and when two namespaces differ only in case, at the end
//     of a long one, or in a '.' and a '-'.
//   - Sizes: the longest keys a Limiter names (a prefix and a policy name
//     of 64 characters each) count apart when the names differ in their
//     last character alone, and a state that grows with its entries (a
//     sliding log's, a concurrency limit's leases) is kept whole at 1,000
//     of them, some 8 to 16 KB: a store that cuts keys or values at a
//     length past what the other checks write fails here.
//   - Reset: on a store.Deleter, Reset from one instance empties the key
//     another filled; on any other store it reports core.ErrUnsupported.
//   - Expiry (with an Inspector, once per path): a key written with a short
//     TTL is gone within a few seconds of it; then a decision on the expired
//     key meets a fresh quota, and its admission writes the key again (a
//     store whose insert fails while an expired row is in the way fails
//     here).
//   - Retention (once per path): one key per algorithm, drained on the
//     real clock under a limit of one per window W, is denied again when
//     asked from another instance at three times until its denial's
//     RetryAfter runs out (less 150 ms for a round trip and a server clock
//     a little off). W is 1.5 s, and on the generic path at least 8 times
//     the clock skew the store allows for (8 s for the usual second), which
//     a store on the limiters' clocks adds to its TTLs and which would
//     otherwise hide a shortened TTL; past 30 s the check skips, saying
//     so. Under that policy the denial lasts as long as the state's TTL
//     for every algorithm but the sliding counter, whose state spans two
//     windows, so a store that drops states before about 85% of their TTL
//     (shortened, converted in the wrong unit, or expired by another
//     clock) admits there, which the ManualClock checks, whose states live
//     for hours, cannot see. A store too slow to ask the questions in time
//     fails it. A store that drops states later, or that does not lengthen
//     its TTLs by the clock skew it declares, can pass. Beside it, a key per
//     algorithm under one per 400 ms must be denied at its second request:
//     a store that keeps TTLs in whole seconds and rounds a state's under a
//     second down to none admits every request there (an error only when
//     its 20 admissions came within the 400 ms, so that a slow store
//     cannot fail it).
//   - LongTTL (with a TTLInspector, once per path): a key drained under a
//     policy of 2 in 30 days (core.MaxWindow) is kept, by the backend's count, until its
//     state is whole again, its denial's ResetAfter (less the time since,
//     and a second for a store that counts whole seconds): a store that
//     keeps a key's first expiry when a later write asks a longer one
//     fails here too. A store that caps or cuts only long
//     TTLs passes Expiry and Retention, whose states last seconds, and
//     fails here. An aligned window drained in its last 10 minutes
//     is skipped, saying so.
//   - Refunds, RefundAcrossEdge (algorithms with a core.Refunder): 200
//     charges at one instant over the fleet, half refunded as they come,
//     never hold more than the quota, and a refund at the instant of its
//     charge gives back exactly its unit; a charge made in a window's last
//     µs and refunded in the next window (or after a refill) never lets
//     more than the quota through at one instant.
//   - Multi (once per path, every algorithm that can be one of several
//     limits, and the calendar): a three-limit set on one identity over
//     core.Multi, each limit binding in turn, 200 concurrent calls: exactly
//     what the Go steps admit all or nothing, a refused request charging no
//     limit, no over-admission without a Clock, refunds of multi-limit
//     charges that hold no more than the smallest quota, and a refusal
//     reporting each limit that would have admitted as it stands
//     (Uncharged).
//   - Processes (with Capabilities.Processes, once per path): the test
//     binary runs again, three times at once (-test.run naming the test
//     that called Run), each process with a client and a Limiter per
//     algorithm, 60 calls each on one key, started together: what they
//     admit in all is exactly the quota of 20. Every other check's fleet is
//     in one process, where a lock that holds only within a process hides a
//     race; this one is not. A harness declares Processes only when
//     NewStore in another process reaches the same backend (a server the
//     test is given through the environment, not one it starts itself).
//     It skips, saying so, when the test's deadline (-timeout) is less
//     than a second away.
//
// # Limits
//
// The suite has no false positives and possible false negatives: a failure
// is a real defect of the store, or of the algorithm when the message says
// so, but passing does not prove a store correct. Races are found by making
// many calls at once, which can miss a narrow window: run the suite under
// -race, and more than once (-count) when changing a store. It asserts
// nothing about speed, and no timing: checks on the real clock use windows
// so long that the test's own pace cannot matter; the ManualClock checks use
// windows of an hour or more, so that a store expiring keys by its own clock
// rarely meets them, and allow for it where it does, and run decades ahead
// of the system clock, so that a store sweeping expired keys by that clock
// never sweeps a state they still count; Expiry and Retention
// are the only checks that wait (a few seconds, and one to two of
// Retention's windows: 1.5 to 3 s, or 8 to 16 s on the generic path of a
// store that allows for a second of skew). It does not check that Update
// honours its context (a store that ignores a deadline passes, slowly),
// nor how a store classes its errors: it makes no fault, so any error in
// the concurrent checks fails them, and whether a store says
// store.UnknownOutcome exactly when a write may have happened is for a
// test that cuts its connections (this repository's faults module does,
// through a proxy, for its own stores). A
// CAS store may give up on a hot key (core.ErrContention) in the concurrent
// checks as long as enough calls are decided to fill the quota; every other
// error fails the check.
//
// The bounds on out-of-order and skewed clocks assume what every algorithm
// of package algorithm does: a call whose clock reads earlier than one
// already decided is judged as standing still or more strictly, never more
// generously. A store author who lists an algorithm of their own in
// Capabilities.Algorithms needs it to do the same.
//
// Speed is measured by RunBenchmarks, never by Run.
package conformance
