package region

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// report is one region's entry in the coordination store's record.
type report struct {
	V    int    `json:"v"`
	Name string `json:"n"`
	// Seq grows with every write of the region: the others judge its lease
	// by when they last saw Seq change, on their own clocks.
	Seq uint64 `json:"s"`
	// Claim is the allowance the region may be enforcing: the largest it
	// enforced within Hold, or the one it is about to enforce.
	Claim int64 `json:"c"`
	// Demand and Used are the units asked and admitted in the last period
	// (scaled to one SyncPeriod).
	Demand int64 `json:"d"`
	Used   int64 `json:"u"`
	// Timing is the region's SyncPeriod, lease and Hold, in µs: every
	// region of a split must have the same (absent in a report of an
	// earlier release).
	Timing *[3]int64 `json:"t,omitempty"`
	// Policy is the global policy's Limit and Window (µs): every region of
	// a split must have the same (absent in a report of an earlier
	// release). A rolling change of the limit is a mismatch until every
	// region has it.
	Policy *[2]int64 `json:"p,omitempty"`
}

// version marks a report of this package in the coordination store.
const version = 1

// maxDemand caps a reported demand, so that sums stay far from overflow.
const maxDemand = 1 << 40

// seen is what a region knows of another's lease.
type seen struct {
	seq   uint64
	first time.Time // when this region first read seq (after the read)
	// back marks a report older than one read before it (a lower Seq):
	// the coordinator went back to an earlier state of its data (restarted
	// from a snapshot, a replica promoted). first is then still when the
	// later report was first read.
	back bool
}

// held is an allowance enforced until a time.
type held struct {
	until     time.Time
	allowance int64
}

// syncState is the synced mode's memory, guarded by Region.mu.
type syncState struct {
	synced  bool
	lastOK  time.Time // when the last successful Sync began
	lastRep time.Time // when demand was last reported
	seen    map[string]seen
	history []held // allowances enforced within Hold, oldest first
	view    View
}

// View is what a region made of the split at its last successful Sync.
type View struct {
	// Synced reports whether any Sync succeeded.
	Synced bool
	// At is when that Sync began, by Config.Clock.
	At time.Time
	// Target is the allowance the demand called for; Allowance what the
	// region enforces (Target, less what other regions still hold, never
	// below the floor); Claim what it told the others it may be enforcing.
	Target, Allowance, Claim int64
	// Live lists, per Member, whether the region counted it as live.
	Live []bool
	// Seen lists, per Member, when the region first read that member's
	// current report (its lease runs out LeasePeriods·SyncPeriod later);
	// zero for none, and for the region itself.
	Seen []time.Time
	// Claims lists, per Member, the allowance the region left to it.
	Claims []int64
	// Demands lists, per Member, the demand of its last period that the
	// target was computed from (this region's own included).
	Demands []int64
}

// Status returns the region's view at its last successful Sync.
func (r *Region) Status() View {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.st.view
	v.Live = append([]bool(nil), v.Live...)
	v.Claims = append([]int64(nil), v.Claims...)
	v.Seen = append([]time.Time(nil), v.Seen...)
	v.Demands = append([]int64(nil), v.Demands...)
	return v
}

// Run syncs every SyncPeriod until ctx ends, and returns ctx.Err(). Each
// Sync is bounded by the time the region keeps its allowance without one
// (LeasePeriods·SyncPeriod − Hold − the longer of SyncPeriod and the
// limiter's Timeout): a slower one could not help. When ctx ends during a
// Sync, Run returns once the coordinator's call under way does: at once on
// a store that returns at a cancellation, else at that call's answer or
// the Sync's bound (store/redis's Update waits for the round trip under
// way). It returns at once, nil, unless the mode is Synced. A failed Sync
// is retried at the next period; the region keeps its allowance meanwhile,
// as Sync says; Config.OnSyncError hears why it failed.
func (r *Region) Run(ctx context.Context) error {
	if r.mode != Synced {
		return nil
	}
	t := time.NewTicker(r.period)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, r.keep())
		if err := r.Sync(sctx); err != nil && r.onErr != nil && ctx.Err() == nil {
			r.onErr(err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sync reads every other region's report from the coordinator, writes the
// region's own, and moves the allowance. It does nothing, and returns nil,
// unless the mode is Synced. Each region writes only its own key, so syncs
// of different regions never contend: one sync is a read of the others'
// keys (in parallel), a compare-and-swap of its own, and, for a raise, a
// second read.
//
// A raise is enforced only once it is written and a read after the write
// still leaves room for it; a cut is enforced at once but stays claimed for
// Hold, so the claims in the store always cover what every region may admit
// (see the package doc). When Sync fails, the region keeps its allowance
// until LeasePeriods·SyncPeriod − Hold − the longer of SyncPeriod and the
// limiter's Timeout after the start of its last successful Sync, and then
// holds its floor; the error is the store's. A Sync that reads a report of
// another timing or policy (Config) holds the floor at once.
func (r *Region) Sync(ctx context.Context) error {
	if r.mode != Synced {
		return nil
	}
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	m, err := r.prepare()
	if err != nil {
		return err
	}
	if err := r.exchange(ctx, m); err != nil {
		// Not reported: count it again in the next report.
		r.asked.Add(m.asked)
		r.used.Add(m.used)
		if m.mismatch != nil && err == m.mismatch {
			// The regions split different limits: what this one keeps
			// may be more than the other's limit leaves it.
			r.holdFloor()
		}
		return fmt.Errorf("region %s: sync: %w", r.names[r.self], err)
	}
	return r.commit(m)
}

// exchange is the store's part of Sync, run without r.mu so that a region
// whose lease runs out meanwhile falls back to its floor at once (AllowN).
func (r *Region) exchange(ctx context.Context, m *syncRound) error {
	if err := r.read(ctx, m); err != nil {
		return err
	}
	m.plan()
	w := &writeReport{m: m}
	if err := r.coord.Update(ctx, r.keys[r.self], w); err != nil {
		return err
	}
	if w.err != nil {
		return w.err
	}
	if m.mismatch != nil {
		// Written (its claim covers what it enforces), not enforced.
		return m.mismatch
	}
	if m.allowance <= m.current {
		return nil
	}
	// A raise: read again, after the write. Of two regions that raise at
	// once, at least one reads the other's new claim, so they cannot both
	// take the same units.
	if err := r.read(ctx, m); err != nil {
		return err
	}
	if m.mismatch != nil {
		// First read now: the raise is not enforced (the claim written
		// covers it).
		return m.mismatch
	}
	m.allowance = max(r.floors[r.self], min(m.allowance, r.limit-m.others()))
	m.reread = true
	return nil
}

// readErrors joins the errors of the reads of other regions' reports, each
// distinct message once, with the regions it came from: a deadline met by
// every read is one line, not one per region.
func readErrors(names []string, errs []error) error {
	var out []error
	var from [][]string
	for j, err := range errs {
		if err == nil {
			continue
		}
		i := slices.IndexFunc(out, func(e error) bool { return e.Error() == err.Error() })
		if i < 0 {
			i = len(out)
			out, from = append(out, err), append(from, nil)
		}
		from[i] = append(from[i], names[j])
	}
	for i, err := range out {
		what := "the report of "
		if len(from[i]) > 1 {
			what = "the reports of "
		}
		out[i] = fmt.Errorf("reading %s%s: %w", what, strings.Join(from[i], ", "), err)
	}
	return errors.Join(out...)
}

// read reads every other region's report, in parallel, into m.
func (r *Region) read(ctx context.Context, m *syncRound) error {
	var wg sync.WaitGroup
	errs := make([]error, len(r.names))
	reads := make([]readReport, len(r.names))
	for j := range r.names {
		if j == r.self {
			continue
		}
		wg.Go(func() { errs[j] = r.coord.Update(ctx, r.keys[j], &reads[j]) })
	}
	wg.Wait()
	if err := readErrors(r.names, errs); err != nil {
		return err
	}
	after := r.clock.Now()
	for j := range r.names {
		if j == r.self {
			continue
		}
		rep := reads[j].rep
		if reads[j].err != nil || (rep != nil && rep.Name != r.names[j]) {
			// Not a report of this split: leave the key alone, and count
			// the region at its floor, as an absent one.
			rep = nil
		}
		m.reports[j] = rep
		if rep == nil {
			continue
		}
		if own := r.timings(); rep.Timing != nil && *rep.Timing != own && m.mismatch == nil {
			// The bound holds only for a split of one timing. The round
			// still writes this region's report, so that the other region
			// reads the mismatch too, and then fails: each of them holds
			// its floor until they agree, whichever wrote first.
			m.mismatch = fmt.Errorf("region %s syncs every %v with a lease of %v and a hold of %v, and region %s every %v, %v and %v: "+
				"every region of a split must be given the same SyncPeriod, LeasePeriods and Hold (until they are, both hold their floors)",
				rep.Name, micros(rep.Timing[0]), micros(rep.Timing[1]), micros(rep.Timing[2]),
				r.names[r.self], micros(own[0]), micros(own[1]), micros(own[2]))
		}
		if own := r.policy(); rep.Policy != nil && *rep.Policy != own && m.mismatch == nil {
			m.mismatch = fmt.Errorf("region %s splits a limit of %d per %v, and region %s %d per %v: "+
				"every region of a split must be given the same Limiter.Policy (until they are, both hold their floors)",
				rep.Name, rep.Policy[0], micros(rep.Policy[1]), r.names[r.self], own[0], micros(own[1]))
		}
		switch s, ok := m.seen[rep.Name]; {
		case ok && rep.Seq < s.seq:
			// Its writer may enforce the claim of the later report, which
			// is gone: counted as a lost report (judge) until it writes
			// again.
			m.seen[rep.Name] = seen{seq: rep.Seq, first: s.first, back: true}
		case !ok || s.seq != rep.Seq:
			// After the read, so never before its writer's lease began.
			m.seen[rep.Name] = seen{seq: rep.Seq, first: after}
		}
	}
	m.judge(after)
	return nil
}

// prepare reads what one sync needs under r.mu: the clock, the demand of
// the last period, the allowance held within Hold, what is known of the
// other regions' leases. A region past its lease falls back here too.
func (r *Region) prepare() (*syncRound, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t0 := r.clock.Now()
	if r.st.synced && !t0.Before(r.st.lastOK.Add(r.keep())) {
		if err := r.toFloor(t0); err != nil {
			return nil, err
		}
	}
	// Demand and usage of the last period, scaled to one SyncPeriod.
	asked, used := r.asked.Swap(0), r.used.Swap(0)
	if el := t0.Sub(r.st.lastRep); r.st.synced && el > r.period {
		asked = mulDiv(asked, int64(r.period), int64(el))
		used = mulDiv(used, int64(r.period), int64(el))
	}
	asked, used = min(asked, maxDemand), min(used, maxDemand)
	cur := r.lim.Load().allowance
	hv := cur
	for _, h := range r.st.history {
		if r.heldUntil(h).After(t0) {
			hv = max(hv, h.allowance)
		}
	}
	n := len(r.names)
	sn := maps.Clone(r.st.seen)
	if sn == nil {
		sn = map[string]seen{}
	}
	return &syncRound{r: r, now: t0, asked: asked, used: used, current: cur, held: hv, first: !r.st.synced,
		seen: sn, reports: make([]*report, n), live: make([]bool, n), claims: make([]int64, n)}, nil
}

// commit puts what a successful sync decided in force.
func (r *Region) commit(m *syncRound) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t1 := r.clock.Now()
	r.st.seen = m.seen
	if m.restarted > 0 {
		r.st.history = append(r.st.history, held{until: t1, allowance: m.restarted})
	}
	if !m.reread && r.st.synced && !t1.Before(r.st.lastOK.Add(r.keep())) {
		// The sync outlasted the region's lease on its last report: the
		// others may have taken its share meanwhile, and no read after
		// this write says they did not. Hold the floor until the next
		// sync raises it the way every raise goes.
		m.allowance = min(m.allowance, r.floors[r.self])
	}
	r.st.synced, r.st.lastOK, r.st.lastRep = true, m.now, m.now
	if err := r.enforce(m.allowance, t1); err != nil {
		return err
	}
	r.drop.Store(m.now.Add(r.keep()).UnixNano())
	m.claims[r.self] = m.claim
	sn := make([]time.Time, len(r.names))
	for j, rep := range m.reports {
		if j != r.self && rep != nil {
			sn[j] = m.seen[rep.Name].first
		}
	}
	r.st.view = View{Synced: true, At: m.now, Target: m.target, Allowance: m.allowance, Claim: m.claim, Live: m.live, Claims: m.claims, Seen: sn, Demands: m.demands}
	return nil
}

// keep is how long after the start of its last successful sync a region
// keeps its allowance: its lease, less Hold (what it admitted must stay
// covered that long) and a period or the limiter's Timeout, whichever is
// longer (for decisions begun before it fell back, and for the rate at
// which clocks drift apart).
func (r *Region) keep() time.Duration { return r.lease - r.hold - max(r.period, r.inflight) }

// heldUntil is when the claim on an allowance enforced until h.until ends:
// Hold later, or, for an aligned hold, at the end of the window that holds
// h.until, a period later (for the skew between this region's clock and
// its store's). Windows are counted from the Unix epoch, as the window
// algorithms count theirs; time.Time.Truncate counts from the zero time,
// 62,135,596,800 s earlier, which is a whole number of windows only for
// some lengths (not 7 s, nor a week).
func (r *Region) heldUntil(h held) time.Time {
	if w := int64(r.aligned); w > 0 {
		ns := h.until.UnixNano()
		end := ns - ns%w
		if ns%w < 0 {
			end -= w // before the epoch: % rounds toward zero
		}
		if end != ns {
			end += w
		}
		return time.Unix(0, end).Add(r.period)
	}
	return h.until.Add(r.hold)
}

// enforce puts allowance a in force at now, remembering the one it
// replaces for Hold. The caller holds r.mu.
func (r *Region) enforce(a int64, now time.Time) error {
	old := r.lim.Load()
	if old.allowance == a {
		return nil
	}
	l, err := r.limiterFor(a)
	if err != nil {
		return err
	}
	r.lim.Store(&enforcer{l: l, allowance: a})
	keep := r.st.history[:0]
	for _, h := range r.st.history {
		if r.heldUntil(h).After(now) {
			keep = append(keep, h)
		}
	}
	// A decision begun under the old limiter may be decided by the store
	// a moment after the swap, within the limiter's Timeout: the old
	// allowance counts as enforced until then.
	r.st.history = append(keep, held{until: now.Add(r.inflight), allowance: old.allowance})
	return nil
}

// syncRound is one Sync's working state.
type syncRound struct {
	r           *Region
	now         time.Time
	asked, used int64
	current     int64 // the allowance in force when the round began
	held        int64 // the most enforced within Hold
	first       bool
	seen        map[string]seen // a copy: committed when the round succeeds
	reports     []*report
	live        []bool
	claims      []int64 // per member: what this region leaves to it
	target      int64
	allowance   int64
	claim       int64
	restarted   int64 // the claim a restarted region found of its own
	demands     []int64
	reread      bool  // the others were read again after this region's write
	mismatch    error // a report of another timing was read (see read)
}

// judge decides, at now (just after a read), which regions are live and
// what each one's claim leaves aside.
func (m *syncRound) judge(now time.Time) {
	r := m.r
	for j, rep := range m.reports {
		switch {
		case j == r.self:
			m.live[j] = true
		case rep == nil || m.seen[rep.Name].back:
			// No report: the coordinator lost it (restarted empty, flushed,
			// evicted), or the region never wrote one; or only one older
			// than a report read before (the coordinator went back to an
			// earlier snapshot). Its writer may still enforce a claim: the
			// last it wrote, which this region may not have read. So until
			// the lease on the last report read of it ends (or, of one
			// never read, a lease after this region was made), its claim
			// is unknown, any up to the whole limit; after that it is
			// counted at its floor, as a region cut off is.
			since := r.born
			if s, ok := m.seen[r.names[j]]; ok {
				since = s.first
			}
			m.live[j], m.claims[j] = false, r.floors[j]
			if now.Before(since.Add(r.lease)) {
				m.claims[j] = r.limit
			}
		default:
			// A report not seen before, or changed, is live; an unchanged
			// one is live until Lease after this region first read it.
			s := m.seen[rep.Name]
			m.live[j] = now.Before(s.first.Add(r.lease))
			m.claims[j] = r.floors[j]
			if m.live[j] {
				m.claims[j] = max(rep.Claim, r.floors[j])
			}
		}
	}
}

// others is what the other regions' claims leave aside.
func (m *syncRound) others() int64 {
	var t int64
	for j, c := range m.claims {
		if j != m.r.self {
			t += c
		}
	}
	return t
}

// plan computes the target, the allowance and the claim from the reports
// read.
func (m *syncRound) plan() {
	r := m.r
	demands := make([]int64, len(r.names))
	for j, rep := range m.reports {
		if j == r.self {
			demands[j] = m.asked
		} else if m.live[j] {
			demands[j] = min(max(rep.Demand, 0), maxDemand)
		}
	}
	m.demands = demands
	m.target = allocate(r.limit, r.floors, r.weights, demands, m.live)[r.self]
	m.allowance = max(r.floors[r.self], min(m.target, r.limit-m.others()))
	m.claim = max(m.allowance, m.held)
}

// readReport reads one region's report and writes nothing.
type readReport struct {
	rep *report
	err error
}

func (rr *readReport) Apply(state []byte) ([]byte, time.Duration) {
	rr.rep, rr.err = decode(state)
	return nil, 0
}

// writeReport writes the region's report over its own key. A compare-and-
// swap store may run it more than once; the last run is the one written.
type writeReport struct {
	m   *syncRound
	err error
}

func (w *writeReport) Apply(state []byte) ([]byte, time.Duration) {
	m, r := w.m, w.m.r
	own, err := decode(state)
	if err != nil {
		w.err = fmt.Errorf("region %s: the coordinator's key %s holds no report of a region: %w", r.names[r.self], r.keys[r.self], err)
		return nil, 0
	}
	w.err, m.restarted = nil, 0
	m.claim = max(m.allowance, m.held)
	var seq uint64
	switch {
	case own != nil:
		seq = own.Seq
		if m.first {
			// A restarted region: what it claimed before may still be
			// counted in its regional store's windows.
			m.restarted = own.Claim
			m.claim = max(m.claim, own.Claim)
		}
	case m.first:
		// No report of its own: a first start, or a restart after the
		// coordinator lost the report (restarted empty, flushed,
		// evicted). What a process of this region enforced before may
		// still be counted in its store's windows, and nobody can read
		// it any more: it is unknown, any up to the whole limit, as the
		// others count a report that vanished. Claimed until the hold
		// ends, so that they keep to their floors meanwhile.
		m.restarted = r.limit
		m.claim = r.limit
	}
	timing, policy := r.timings(), r.policy()
	next, err := json.Marshal(report{V: version, Name: r.names[r.self], Seq: seq + 1, Claim: m.claim, Demand: m.asked, Used: m.used, Timing: &timing, Policy: &policy})
	if err != nil {
		w.err = err
		return nil, 0
	}
	// The report outlives the lease by far; the region renews it each period.
	return next, 4*r.lease + r.hold
}

// policy is the global policy's Limit and Window in µs, as the region's
// report gives them.
func (r *Region) policy() [2]int64 {
	return [2]int64{r.limit, r.cfg.Policy.Window.Microseconds()}
}

// timings is the region's SyncPeriod, lease and Hold in µs, as its report
// carries them.
func (r *Region) timings() [3]int64 {
	return [3]int64{r.period.Microseconds(), r.lease.Microseconds(), r.hold.Microseconds()}
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// decode reads a report; an empty state is none.
func decode(state []byte) (*report, error) {
	if len(state) == 0 {
		return nil, nil
	}
	var rep report
	if err := json.Unmarshal(state, &rep); err != nil {
		return nil, err
	}
	if rep.V != version {
		return nil, fmt.Errorf("report version %d, want %d", rep.V, version)
	}
	return &rep, nil
}
