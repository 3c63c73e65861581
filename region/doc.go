// Package region holds one global limit across regions without a
// cross-region round trip per request: each region enforces a share of the
// limit on its own regional store, and the shares move.
//
// A Region is one region's member of the split. Its AllowN decides against
// the region's allowance with a core.Limiter built from Config.Limiter,
// whose Policy is the global one; the allowance changes at run time by
// swapping in a limiter of the same policy Name and Prefix with another
// Limit, so every key's state carries over (see "A change of allowance"
// below). The split applies to every identity alike: it fits one global
// budget (an upstream's quota, a fleet-wide limit per client whose traffic
// moves between regions together), not a share kept per identity.
//
// # Modes
//
// Static: region i enforces ⌊L·wᵢ/Σw⌋ of the global limit L, by the
// Members' weights. Never more than L in all, with no coordination; a quiet
// region's share is wasted, and a busy one is held to its share.
//
// Synced: every SyncPeriod P each region reads every other region's report
// from the coordination store (Config.Coordinator: any store.Store, say a
// global Redis) and writes its own (the units asked and admitted in the
// last period, and its claim: the allowance it may be enforcing), each
// region on a key of its own, so that no two regions contend for a key.
// The allowance follows demand: each region has its floor fᵢ, and the
// rest, L − Σf, is split in proportion to the demand of the live regions
// (by weight when none asks). A region raises its allowance only to what
// the others' claims leave, and only after it has written the raised claim
// and read the others' again: of two regions that raise at once, at least
// one reads the other's new claim. It cuts at once, but keeps claiming the
// largest allowance it enforced for Hold (see Config.Hold) after the
// cut. So the claims in the store cover, at every instant, all
// that any region has enforced within Hold. A sync is three or four round
// trips to the coordinator: one read of all the others (in parallel), a
// read and a swap of its own key, and after a raise a second read.
//
// Leases. A region judges another by when it first read that region's
// report unchanged (Seq), on its own clock: a region whose report has not
// changed for the lease, K·P (K = LeasePeriods), is dark, and its share
// above its floor is split among the others at the next sync, within one
// period. A region cut off from the coordinator keeps its last allowance,
// for availability, for K·P − Hold − P (less the limiter's Timeout instead
// of P, when longer) after the start of its last successful sync, and then
// holds its floor, which no other region ever
// takes. Its lease began before its write, and the others' count from after
// their read, so it has stopped using its share Hold + P before anyone may
// take it: a partition cannot double-spend a share. A region that returns
// finds its share held by others; it is handed back as they cut and their
// holds run out (for an aligned hold, the end of the window of the cut
// plus P; then the raise waits for its next sync: 2.5–4 s with the
// README's timing, a window more when a holder cuts in two steps, as one
// whose demand fell over two syncs does: 4.2 s was measured), never by a
// burst above L.
//
// Slack: every region enforces the whole of L locally, with no
// coordination: coarse abuse protection at local cost, admitting up to
// N × L in all for N regions (each region at most L).
//
// # The bound of the synced split
//
// Write L for the global Limit, W for its Window, P for SyncPeriod, H for
// Hold, N for the number of regions and F for the sum of their floors.
//
// With H >= W (the default: Window, or for FixedWindow and SlidingCounter,
// which count per aligned window, until the end of the window in which the
// allowance was last enforced, plus P), the window algorithms admit at
// most L in every window, for any P, N and any shift of demand:
// FixedWindow and SlidingCounter at most L in every aligned window,
// SlidingLog at most L in every trailing window. Proof: a region admits in a window at most the
// largest allowance aᵢ it enforced during that window (each admission is
// checked against the limit in force, and the counts carry over). Take the
// region whose such allowance was written last, at g: it enforced it only
// after reading, after g, every other region's claim, and each of them
// still covered that region's largest allowance of the window (written
// before g and enforced within the window, so still held then), or that
// region was dark and enforcing only its floor, which every grant leaves
// aside. So the largest allowances of the window add up to at most L.
//
// With H < W, a cut share is handed over before the window that counted it
// ends, and a window may count it twice: at most L + M, where M is the
// allowance that moved from one region to another within the window (and
// the H + 2·P before it, for the grants that were waiting on a hold). The
// movable part is L − F, and the shares move with the demand, so M <=
// (L − F)·S, where S is the demand shift: the fraction of all demand that
// moved between regions over that time, as the reports of each period saw
// it, counted each time it moved (a share counts again in every region it
// is handed to within the window). All demand moving once, from one
// region to another, within one window gives 2·L − F: with L = 100 and
// F = 24, TestRegionSplitWithoutHoldOverAdmitsOnRealServers (faults
// module) measures 171 in a window without the hold, and at most 100 with
// it, on the same servers and traffic. Demand that visits every one of N
// regions within one window moves N − 1 times: up to L + (N − 1)·(L − F),
// 252 for three regions with L = 100 and F = 24 (measured under a
// ManualClock, all demand moving a → b → c in every window). The hold
// keeps every case at L.
//
// The price of the hold is the time a shift takes to be served: the region
// that lost demand reports it at its next sync, its cut is handed over
// when the hold ends (H later; at the end of the window, plus P, for an
// aligned hold), and the region that gained it raises at its next sync:
// within H + 3·S of the shift (S = the longer of P and a sync's round
// trips) the busy region has L − F + its floor. Meanwhile the fleet admits
// less than L: utilization (admitted over min(demand, L)) is about
// 1 − (H + 3·S)/T for demand that moves every T. TestRegionSplitOnRealServers
// in the faults module measures it against real servers, with 50–150 ms
// to the coordinator; the README shows the figures.
//
// The rate algorithms bound units over an interval, not a window. With
// Burst scaled as the Region scales it (Burst·a/L, so Burst·T stays about
// Burst·W/L), TokenBucket, GCRA and LeakyBucket admit at most (B/L +
// d/W)·L in all (+ ⌊MaxDelay/T⌋ for the queue) in any interval of length
// d <= H: the bound of one limiter of the global policy, since each unit
// costs W/aᵢ of the time owed, whatever aᵢ it was admitted under.
// Each region's Burst is at least 1, so a Burst below N lets the fleet
// admit N units at one instant, not Burst.
//
// # Lost reports, and clocks
//
// The proof needs every claim a region enforces to stay readable until
// its lease ends. A coordinator that loses reports (restarted without
// persistence, flushed, evicted) breaks that, so a report that is missing
// counts as an unknown claim, any up to L, until the lease on the last
// report read of that region ends (or, for a region never read, a lease
// after the Region was made), and only then as its floor: every region
// holds its floor meanwhile, and the split is made again once the reports
// are back. TestCoordinatorDataLossKeepsTheLimit loses every report in the
// middle of a window; without the rule that window admitted 130 of 100. A
// coordinator that goes back to an earlier state (restarted from its last
// snapshot, a replica promoted before it had every write) breaks it too,
// and shows a region's old report, whose claim may be its floor while it
// enforces most of L: a report older than one already read (a lower Seq)
// counts as a missing one until its region writes again
// (TestCoordinatorBackToASnapshotKeepsTheLimit: 152 of 100 without it).
// For the same reason a region that finds no report of its own at its
// first sync (a first start, or a restart after the coordinator lost its
// report) claims the whole limit until its hold ends: a process of it may
// have enforced any allowance before, which its store's windows still
// count (TestRestartAfterCoordinatorDataLossKeepsTheLimit: 138 of 100
// without it). A fleet that starts together holds its floors for that
// long, as it does for the lease after each region is made.
//
// The aligned hold ends at the end of a window by this region's clock,
// plus P for the skew between it and its store's: the bound takes each
// regional store's clock (a regional Redis decides by its own TIME) to be
// within P of its region's. A store clock behind by more than P counts a
// window that ends after the hold, which may then admit as much as without
// the hold (measured: 168 of 100 with P = 20 ms and the store 50 ms
// behind). NTP keeps machines within milliseconds; keep P
// above the skew.
//
// # A change of allowance, per algorithm
//
// The limiter is rebuilt with Limit = the new allowance a (Burst scaled by
// a/L when the policy sets one); the stored state is read under it:
//
//   - FixedWindow, SlidingCounter: the counts of the window(s) are kept and
//     compared with the new Limit. A cut below the count refuses until the
//     window ends; a raise admits up to the new Limit at once.
//   - SlidingLog: the logged units are kept; the new Limit applies to the
//     trailing window at once.
//   - TokenBucket, GCRA, LeakyBucket: the state is a time (the time the
//     bucket is full again, TAT, drain), the time the admitted units still
//     owe, which is kept; the interval T = W/a changes, so the bucket stays
//     as full, as a fraction, as it was: a raise from a to a' turns r units
//     left into about r·a'/a at once, a cut likewise shrinks them.
//   - Concurrency holds leases, which a Region cannot move: New refuses it.
//
// A cost n above the allowance in force (within the global quota) is a
// refusal, not an error: the allowance may grow.
package region
