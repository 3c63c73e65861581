package region

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"
)

// report is one region's entry in the coordination store's record.
type report struct {
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
}

// record is the coordination store's one key: every region's report.
type record struct {
	V       int      `json:"v"`
	Reports []report `json:"r"`
}

// maxDemand caps a reported demand, so that sums stay far from overflow.
const maxDemand = 1 << 40

// seen is what a region knows of another's lease.
type seen struct {
	seq   uint64
	first time.Time // when this region first read seq (after the read)
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
	// Claims lists, per Member, the allowance the region left to it.
	Claims []int64
}

// Status returns the region's view at its last successful Sync.
func (r *Region) Status() View {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.st.view
	v.Live = append([]bool(nil), v.Live...)
	v.Claims = append([]int64(nil), v.Claims...)
	return v
}

// Run syncs every SyncPeriod until ctx ends, and returns ctx.Err(). Each
// Sync is bounded by the time the region keeps its allowance without one
// (LeasePeriods·SyncPeriod − Hold − SyncPeriod): a slower one could not
// help. It returns at once, nil, unless the mode
// is Synced. A failed Sync is retried at the next period; the region keeps
// its allowance meanwhile, as Sync says.
func (r *Region) Run(ctx context.Context) error {
	if r.mode != Synced {
		return nil
	}
	t := time.NewTicker(r.period)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, r.keep())
		_ = r.Sync(sctx)
		cancel()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Sync writes the region's report to the coordinator, reads every other
// region's, and moves the allowance, all in one atomic Update of one key.
// It does nothing, and returns nil, unless the mode is Synced.
//
// A raise is written before it is enforced, and a cut enforced at once but
// written as a claim only after Hold, so the claims in the store always
// cover what every region may admit (see the package doc). When Sync
// fails the region keeps its allowance until its lease, less Hold and one
// period, has run out since the last Sync that succeeded, and then holds
// its floor; the error is the store's.
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
	// The store call runs without r.mu, so that a region whose lease runs
	// out meanwhile falls back to its floor at once (AllowN).
	if err := r.coord.Update(ctx, r.key, m); err != nil {
		// Not reported: count it again in the next report.
		r.asked.Add(m.asked)
		r.used.Add(m.used)
		return fmt.Errorf("region %s: sync: %w", r.names[r.self], err)
	}
	if m.err != nil {
		return m.err
	}
	return r.commit(m)
}

// prepare reads what one sync needs under r.mu: the clock, the demand of
// the last period, the allowance held within Hold, what is known of the
// other regions' leases. A region past its lease falls back here too.
func (r *Region) prepare() (*syncMutation, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t0 := r.clock.Now()
	if r.st.synced && !t0.Before(r.st.lastOK.Add(r.keep())) {
		r.drop.Store(0)
		if err := r.enforce(r.floors[r.self], t0); err != nil {
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
	hv := r.lim.Load().allowance
	for _, h := range r.st.history {
		if h.until.After(t0.Add(-r.hold)) {
			hv = max(hv, h.allowance)
		}
	}
	return &syncMutation{r: r, now: t0, asked: asked, used: used, held: hv, first: !r.st.synced, seen: maps.Clone(r.st.seen)}, nil
}

// commit puts what a successful sync decided in force.
func (r *Region) commit(m *syncMutation) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t1 := r.clock.Now()
	if r.st.seen == nil {
		r.st.seen = map[string]seen{}
	}
	for i, rep := range m.reports {
		if i == r.self || rep == nil {
			continue
		}
		if s, ok := r.st.seen[rep.Name]; !ok || s.seq != rep.Seq {
			// After the read, so never before the writer's lease began.
			r.st.seen[rep.Name] = seen{seq: rep.Seq, first: t1}
		}
	}
	if m.restarted > 0 {
		r.st.history = append(r.st.history, held{until: t1, allowance: m.restarted})
	}
	r.st.synced, r.st.lastOK, r.st.lastRep = true, m.now, m.now
	if err := r.enforce(m.allowance, t1); err != nil {
		return err
	}
	r.drop.Store(m.now.Add(r.keep()).UnixNano())
	r.st.view = View{Synced: true, At: m.now, Target: m.target, Allowance: m.allowance, Claim: m.claim, Live: m.live, Claims: m.claims}
	return nil
}

// keep is how long after the start of its last successful sync a region
// keeps its allowance: its lease, less Hold (what it admitted must stay
// covered that long) and one period (for decisions begun before it fell
// back, and the rate at which clocks drift apart).
func (r *Region) keep() time.Duration { return r.lease - r.hold - r.period }

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
		if h.until.After(now.Add(-r.hold)) {
			keep = append(keep, h)
		}
	}
	// A decision begun under the old limiter may finish a moment after
	// the swap: the old allowance counts as enforced for one more period.
	r.st.history = append(keep, held{until: now.Add(r.period), allowance: old.allowance})
	return nil
}

// syncMutation is the one read-modify-write of Sync. Apply may run more
// than once (a compare-and-swap store retries); the fields it sets are
// those of the last run, the one whose write counted.
type syncMutation struct {
	r           *Region
	now         time.Time
	asked, used int64
	held        int64
	first       bool
	seen        map[string]seen // a copy: Apply must not race the fallback of AllowN
	restarted   int64           // the claim a restarted region found of its own
	reports     []*report
	live        []bool
	claims      []int64
	target      int64
	allowance   int64
	claim       int64
	err         error
}

func (m *syncMutation) Apply(state []byte) ([]byte, time.Duration) {
	r := m.r
	var rec record
	if len(state) > 0 {
		if err := json.Unmarshal(state, &rec); err != nil || rec.V != 1 {
			// Not a record of this package: a key of something else.
			// Leave it alone; the region keeps its allowance.
			m.err = fmt.Errorf("region %s: the coordinator's key %s holds no split record", r.names[r.self], r.key)
			return nil, 0
		}
	}
	m.err, m.restarted = nil, 0
	n := len(r.names)
	m.reports = make([]*report, n)
	for i := range rec.Reports {
		rep := &rec.Reports[i]
		for j, name := range r.names {
			if name == rep.Name {
				m.reports[j] = rep
			}
		}
	}
	m.live = make([]bool, n)
	m.claims = make([]int64, n)
	demands := make([]int64, n)
	for j := range r.names {
		rep := m.reports[j]
		if j == r.self {
			m.live[j], demands[j] = true, m.asked
			continue
		}
		if rep == nil {
			m.claims[j] = r.floors[j]
			continue
		}
		s, ok := m.seen[rep.Name]
		// A report not seen before, or changed, is live: its writer's
		// lease began before this read. An unchanged one is live until
		// Lease after this region first read it.
		m.live[j] = !ok || s.seq != rep.Seq || m.now.Before(s.first.Add(r.lease))
		if m.live[j] {
			m.claims[j] = max(rep.Claim, r.floors[j])
			demands[j] = min(max(rep.Demand, 0), maxDemand)
		} else {
			m.claims[j] = r.floors[j]
		}
	}
	targets := allocate(r.limit, r.floors, r.weights, demands, m.live)
	var others int64
	for j, c := range m.claims {
		if j != r.self {
			others += c
		}
	}
	self := r.self
	m.target = targets[self]
	m.allowance = max(r.floors[self], min(m.target, r.limit-others))
	hv := m.held
	var seq uint64
	if own := m.reports[self]; own != nil {
		seq = own.Seq
		if m.first {
			// A restarted region: what it claimed before may still be
			// counted in its regional store's windows.
			hv = max(hv, own.Claim)
			m.restarted = own.Claim
		}
	}
	m.claim = max(m.allowance, hv)
	m.claims[self] = m.claim
	mine := report{Name: r.names[self], Seq: seq + 1, Claim: m.claim, Demand: m.asked, Used: m.used}
	out := record{V: 1}
	for _, rep := range rec.Reports {
		if rep.Name != mine.Name {
			out.Reports = append(out.Reports, rep)
		}
	}
	out.Reports = append(out.Reports, mine)
	next, err := json.Marshal(out)
	if err != nil {
		m.err = err
		return nil, 0
	}
	// The record outlives every lease by far; any region's write renews it.
	return next, 4*r.lease + r.hold
}
