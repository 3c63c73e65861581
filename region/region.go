package region

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// Mode is how a Region sizes its share of the global limit.
type Mode int

const (
	// Static enforces a fixed share, ⌊Limit·Weight/ΣWeight⌋, in each region.
	Static Mode = iota
	// Synced moves the shares with demand, through a coordination store
	// (Config.Coordinator) every SyncPeriod.
	Synced
	// Slack enforces the whole Limit in every region, with no
	// coordination: up to N × Limit in all for N regions.
	Slack
)

// String returns "static", "synced" or "slack".
func (m Mode) String() string {
	switch m {
	case Static:
		return "static"
	case Synced:
		return "synced"
	case Slack:
		return "slack"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// MaxMembers is the most regions one split may have.
const MaxMembers = 64

// Member is one region of the split, as every region's Config lists it.
type Member struct {
	// Name identifies the region in the coordination store: 1 to 64
	// characters from [A-Za-z0-9._-], unique in the split, and not
	// "region" in the synced mode (the coordinator's keys are named so).
	Name string
	// Weight is the region's part of the static split, and of the synced
	// split while no live region reports any demand. 0 to core.MaxLimit;
	// when every weight is 0 they count as 1 each.
	Weight int64
	// Floor is, in the synced mode, the allowance the region always holds
	// (its own, never lent): a quiet region can still serve a burst of
	// Floor, and a region cut off from the coordinator past its lease
	// falls back to it. Zero means Limit/(4·N), at least 1. The floors of
	// all members may add up to at most Limit.
	Floor int64
}

// Config configures a Region. Every region of a split must be given the
// same Members, Limiter.Policy (Name, Limit, Window), SyncPeriod,
// LeasePeriods and Hold; only Region, the regional Limiter.Store and
// Coordinator's address differ. Each report carries its region's timing
// (SyncPeriod, lease, Hold) and its policy's Limit and Window: a synced
// region that reads another's of another timing or policy writes its own,
// holds its floor at once and fails its Sync, saying so, and so does the
// other at its next sync; both hold their floors until they agree. In a
// rolling change of them, the other regions keep their allowances until
// their first sync that reads a changed region's report (0.6–1.1 s after
// a restart, measured with a 200 ms SyncPeriod), and the windows until
// then may admit those allowances beside the changed region's floor:
// above a smaller new Limit by up to what they held (with 76 and 11 of 100
// held, 92 of 60 was measured). Members are not compared: lists
// that differ go unnoticed, and a region reads only the reports of the
// members its own list names.
type Config struct {
	// Mode is Static (the zero value), Synced or Slack.
	Mode Mode
	// Region is this region's Member.Name.
	Region string
	// Members lists every region of the split, this one included: 1 to
	// MaxMembers.
	Members []Member
	// Limiter is the configuration of the region's enforcement, with the
	// GLOBAL policy: Policy.Limit is the limit of the whole fleet, and
	// Store the regional store. The Region builds its core.Limiter from it
	// with Policy.Limit set to the region's allowance (and a Burst, when
	// one is set, scaled by allowance/Limit), under the same Name and
	// Prefix, so a change of allowance keeps each key's state (see the
	// package doc for what a change does per algorithm). An algorithm that
	// holds leases (Concurrency) is refused, and so, in the synced mode,
	// is a negative Timeout: the split's bound counts on every decision
	// ending within the Timeout.
	Limiter core.Config
	// Coordinator is the coordination store of the synced mode, shared by
	// every region (a global Redis, say): any store.Store. Required for
	// Synced, ignored otherwise.
	Coordinator store.Store
	// SyncPeriod is how often Run syncs with the coordinator. Default 1 s;
	// at least 1 ms. It, Hold and LeasePeriods are read by the synced mode
	// only: Static and Slack ignore them, whatever their values.
	SyncPeriod time.Duration
	// Hold is how long a region keeps its claim on the largest allowance
	// it enforced, after lowering it, before another region may have it.
	// Zero means the default, which makes the synced split exact for the
	// window algorithms (see the package doc): for FixedWindow and
	// SlidingCounter, which count per aligned window, until the end of the
	// window in which the allowance was last enforced, plus a period; for
	// the others, Policy.Window. Shorter holds move shares faster and
	// over-admit by the bound the package doc states. Negative means none.
	Hold time.Duration
	// LeasePeriods is K: a region whose report has not changed for
	// K·SyncPeriod is dark, and its share above its floor is given to the
	// others. K·SyncPeriod must exceed Hold + SyncPeriod (or the limiter's
	// Timeout, when longer): a region cut off from the coordinator keeps its
	// allowance for K·SyncPeriod − Hold − SyncPeriod (or the Timeout) after
	// the start of its last successful sync, then holds its floor. Default:
	// the least K that keeps the allowance for 3 periods. A sync is up to
	// four round trips to the coordinator: keep that time well above them.
	LeasePeriods int
	// Clock times the sync periods, leases and holds. Nil means
	// core.SystemClock. (Limiter.Clock, if any, decides admissions.)
	Clock core.Clock
	// OnSyncError, when set, hears the error of each Sync that Run makes
	// and that fails (a coordinator that did not answer in time, an
	// allowance the limiter refuses), from Run's goroutine. A split whose
	// syncs keep failing holds every region near its floor, which nothing
	// else reports.
	OnSyncError func(error)
}

// coordName names the coordinator's keys, "<Prefix>:region:<policy>", which
// a region's own keys, "<Prefix>:<Region>:<policy>", must not be.
const coordName = "region"

// Region enforces one region's share of a global limit. It is safe for
// concurrent use: share one per region and policy, and call Run (or Sync
// every SyncPeriod) in the synced mode. A Region counts on its own keys in
// the regional store, under "<Prefix>:<Region>" (Limiter.Prefix, or
// core.DefaultPrefix); two processes of one region that each run a Region
// must be two Members.
type Region struct {
	mode     Mode
	self     int
	names    []string
	floors   []int64
	weights  []int64
	limit    int64
	burst    int64
	quota    int64 // the global policy's Quota
	cfg      core.Config
	coord    store.Store
	keys     []store.Key // per member: its report in the coordinator
	period   time.Duration
	hold     time.Duration
	aligned  time.Duration // the window of an aligned hold; 0 for none
	lease    time.Duration
	inflight time.Duration // how long a decision may take: the limiter's Timeout
	clock    core.Clock
	onErr    func(error) // Config.OnSyncError
	born     time.Time   // when New made it: what it knows of the others starts here

	lim   atomic.Pointer[enforcer]
	drop  atomic.Int64 // UnixNano past which an unsynced region holds its floor; 0: none
	asked atomic.Int64 // units asked since the last report
	used  atomic.Int64 // units admitted since the last report

	syncMu sync.Mutex // serializes Sync
	mu     sync.Mutex // guards st, cache and changes of lim
	st     syncState
	cache  map[int64]*core.Limiter
}

// enforcer is the limiter in force and the allowance it enforces.
type enforcer struct {
	l         *core.Limiter
	allowance int64
}

// New validates cfg and returns the Region, enforcing its static share, the
// whole Limit (Slack), or, synced, its floor until its first Sync.
func New(cfg Config) (*Region, error) {
	p := cfg.Limiter.Policy
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if store.IsNil(cfg.Limiter.Algorithm) {
		return nil, errors.New("region: Limiter.Algorithm is nil")
	}
	if cfg.Clock != nil && store.IsNil(cfg.Clock) {
		return nil, fmt.Errorf("region: Clock is nil (a nil %T): leave Clock unset for the system clock", cfg.Clock)
	}
	if _, ok := cfg.Limiter.Algorithm.(core.Leaser); ok {
		return nil, errors.New("region: an algorithm that holds leases cannot be split across regions")
	}
	if cfg.Mode != Static && cfg.Mode != Synced && cfg.Mode != Slack {
		return nil, fmt.Errorf("region: unknown Mode %d", int(cfg.Mode))
	}
	n := len(cfg.Members)
	if n == 0 || n > MaxMembers {
		return nil, fmt.Errorf("region: Members must list 1 to %d regions, got %d", MaxMembers, n)
	}
	r := &Region{mode: cfg.Mode, self: -1, limit: p.Limit, burst: p.Burst, quota: cfg.Limiter.Algorithm.Quota(&p),
		cfg: cfg.Limiter, cache: map[int64]*core.Limiter{}}
	allZero := true
	for _, m := range cfg.Members {
		if m.Weight != 0 {
			allZero = false
		}
	}
	seen := map[string]bool{}
	var floors int64
	for i, m := range cfg.Members {
		if err := checkName(m.Name); err != nil {
			return nil, fmt.Errorf("region: Members[%d].Name %w", i, err)
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("region: Members[%d].Name %q appears twice", i, m.Name)
		}
		if m.Name == coordName && cfg.Mode == Synced {
			return nil, fmt.Errorf("region: Members[%d].Name %q is the name of the coordinator's keys: a region so named, on the coordinator's store, would count its clients on the regions' reports", i, m.Name)
		}
		seen[m.Name] = true
		if m.Weight < 0 || m.Weight > core.MaxLimit {
			return nil, fmt.Errorf("region: Members[%d] (%s): Weight must be 0 to %d, got %d", i, m.Name, core.MaxLimit, m.Weight)
		}
		w := m.Weight
		if allZero {
			w = 1
		}
		f := m.Floor
		if f < 0 || f > p.Limit {
			return nil, fmt.Errorf("region: Members[%d] (%s): Floor must be 0 to Limit (%d), got %d", i, m.Name, p.Limit, f)
		}
		if f == 0 {
			f = max(1, p.Limit/int64(4*n))
		}
		floors += f
		r.names = append(r.names, m.Name)
		r.weights = append(r.weights, w)
		r.floors = append(r.floors, f)
		if m.Name == cfg.Region {
			r.self = i
		}
	}
	if r.self < 0 {
		return nil, fmt.Errorf("region: Region %q is not one of Members", cfg.Region)
	}
	prefix := cfg.Limiter.Prefix
	if prefix == "" {
		prefix = core.DefaultPrefix
	}
	// The region's keys are its own (under "<prefix>:<region>"): two
	// members on one regional store must not count on one key, each
	// against its own allowance.
	r.cfg.Prefix = prefix + ":" + cfg.Region
	if len(r.cfg.Prefix) > core.MaxNameLen {
		return nil, fmt.Errorf("region: Limiter.Prefix %q and Region %q name the region's keys %q, longer than %d characters: shorten either", prefix, cfg.Region, r.cfg.Prefix, core.MaxNameLen)
	}
	start := p.Limit
	switch cfg.Mode {
	case Static:
		shares := staticShares(p.Limit, r.weights)
		for i, s := range shares {
			if s < 1 {
				return nil, fmt.Errorf("region: the static share of %s is %d·%d/%d < 1 unit: raise its Weight or the Limit", r.names[i], p.Limit, r.weights[i], sum(r.weights))
			}
		}
		start = shares[r.self]
	case Synced:
		if store.IsNil(cfg.Coordinator) {
			return nil, errors.New("region: Mode Synced needs a Coordinator")
		}
		if floors > p.Limit {
			return nil, fmt.Errorf("region: the floors add up to %d, more than Limit (%d): a member's is its Floor, or Limit/(4·N) and at least 1 when that is 0", floors, p.Limit)
		}
		if err := r.timing(cfg); err != nil {
			return nil, err
		}
		r.coord = cfg.Coordinator
		for _, name := range r.names {
			r.keys = append(r.keys, store.Key{Namespace: store.Namespace(prefix+":"+coordName, p.Name), Identity: name})
		}
		start = r.floors[r.self]
	}
	r.onErr = cfg.OnSyncError
	r.clock = cfg.Clock
	if r.clock == nil {
		r.clock = core.SystemClock{}
	}
	r.born = r.clock.Now()
	l, err := r.limiterFor(start)
	if err != nil {
		return nil, err
	}
	if cfg.Mode == Synced {
		// A raise must not fail at Sync, after its claim is written: the
		// largest allowance the split may give this region, all but the
		// others' floors, must be a policy the algorithm takes.
		if most := p.Limit - (floors - r.floors[r.self]); most != start {
			if _, err := r.limiterFor(most); err != nil {
				return nil, fmt.Errorf("region: a synced region may be given up to %d of the Limit (all but the others' floors), which the limiter refuses: %w", most, err)
			}
		}
	}
	r.lim.Store(&enforcer{l: l, allowance: start})
	return r, nil
}

// timing fills and checks the synced mode's periods.
func (r *Region) timing(cfg Config) error {
	r.period = cfg.SyncPeriod
	if r.period == 0 {
		r.period = time.Second
	}
	if r.period < time.Millisecond || r.period > core.MaxWindow {
		return fmt.Errorf("region: SyncPeriod must be 1ms to %s, got %s", core.MaxWindow, cfg.SyncPeriod)
	}
	r.hold = cfg.Hold
	switch {
	case r.hold == 0:
		r.hold = cfg.Limiter.Policy.Window
		switch cfg.Limiter.Algorithm.(type) {
		case algorithm.FixedWindow, *algorithm.FixedWindow, algorithm.SlidingCounter, *algorithm.SlidingCounter:
			// They count per aligned window: a claim need only outlast
			// the window it was enforced in.
			r.aligned = cfg.Limiter.Policy.Window
		}
	case r.hold < 0:
		r.hold = 0
	case r.hold > core.MaxWindow:
		return fmt.Errorf("region: Hold must be at most %s, got %s", core.MaxWindow, cfg.Hold)
	}
	switch to := cfg.Limiter.Timeout; {
	case to == 0:
		r.inflight = core.DefaultTimeout
	case to < 0:
		// A decision the store answers late is admitted under the
		// allowance it began under, which may have gone to another region
		// since: the split's bound needs each decision's time bounded.
		return fmt.Errorf("region: Limiter.Timeout must not be negative in the synced mode (got %s): a decision with no deadline may be admitted under an allowance lowered long before", to)
	default:
		r.inflight = to
	}
	k := cfg.LeasePeriods
	if k == 0 {
		// The least lease that keeps the allowance for 3 periods.
		m := max(r.period, r.inflight)
		k = int((r.hold+m+r.period-1)/r.period) + 3
		if time.Duration(k) > core.MaxWindow/r.period {
			return fmt.Errorf("region: the default lease, Hold (%s) + max(SyncPeriod, Limiter.Timeout) (%s) + 3·SyncPeriod, is above %s: a synced split of a window this long needs a shorter Hold (see the package doc for the bound without it)", r.hold, m, core.MaxWindow)
		}
	}
	if k < 0 || time.Duration(k) > core.MaxWindow/r.period {
		return fmt.Errorf("region: LeasePeriods must be positive, and LeasePeriods·SyncPeriod at most %s; got %d", core.MaxWindow, cfg.LeasePeriods)
	}
	r.lease = time.Duration(k) * r.period
	if m := max(r.period, r.inflight); r.lease <= r.hold+m {
		return fmt.Errorf("region: LeasePeriods·SyncPeriod (%s) must exceed Hold + max(SyncPeriod, Limiter.Timeout) (%s)", r.lease, r.hold+m)
	}
	return nil
}

func checkName(s string) error {
	if len(s) == 0 || len(s) > core.MaxNameLen {
		return fmt.Errorf("must be 1 to %d characters, got %d", core.MaxNameLen, len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("must use only A-Z a-z 0-9 . _ - (byte %d is %q)", i, s[i:i+1])
		}
	}
	return nil
}

func sum(xs []int64) int64 {
	var t int64
	for _, x := range xs {
		t += x
	}
	return t
}

// limiterFor returns the limiter that enforces allowance a: the global
// policy with Limit a (Burst scaled by a/Limit, at least 1) under the same
// Name and Prefix. Limiters are kept per allowance, at most 64 of them.
// The caller holds r.mu, or is New.
func (r *Region) limiterFor(a int64) (*core.Limiter, error) {
	if l, ok := r.cache[a]; ok {
		return l, nil
	}
	cfg := r.cfg
	cfg.Policy.Limit = a
	if r.burst != 0 {
		cfg.Policy.Burst = max(1, mulDiv(r.burst, a, r.limit))
	}
	l, err := core.New(cfg)
	if err != nil {
		return nil, err
	}
	if len(r.cache) >= 64 {
		clear(r.cache)
	}
	r.cache[a] = l
	return l, nil
}

// Lease is, in the synced mode, LeasePeriods·SyncPeriod: how long the
// others wait on an unchanged report before they take its region's share.
// Zero in the other modes.
func (r *Region) Lease() time.Duration { return r.lease }

// Mode returns the region's mode.
func (r *Region) Mode() Mode { return r.mode }

// Name returns the region's name.
func (r *Region) Name() string {
	if r.names == nil {
		return ""
	}
	return r.names[r.self]
}

// Allowance is the share of the global limit the region enforces now.
func (r *Region) Allowance() int64 {
	if e := r.lim.Load(); e != nil {
		return e.allowance
	}
	return 0
}

// Limiter returns the limiter in force now. It changes with the allowance:
// ask again rather than keep it.
func (r *Region) Limiter() *core.Limiter {
	if e := r.lim.Load(); e != nil {
		return e.l
	}
	return nil
}

// errNotMade is what a Region that New did not make (a zero Region)
// returns: it has no limiter to decide with.
var errNotMade = errors.New("sluice/region: the Region was not made by New")

// Allow is shorthand for AllowN(ctx, identity, 1).
func (r *Region) Allow(ctx context.Context, identity string) (core.Decision, error) {
	return r.AllowN(ctx, identity, 1)
}

// AllowN decides n units for identity against the region's allowance, as
// core.Limiter.AllowN does, and counts them as the region's demand. A cost
// n above the allowance now in force, but within the global policy's quota,
// is refused with a Decision (Allowed false, no RetryAfter), not an error:
// the allowance may grow.
func (r *Region) AllowN(ctx context.Context, identity string, n int64) (core.Decision, error) {
	if dl := r.drop.Load(); dl != 0 && r.clock.Now().UnixNano() >= dl {
		r.fallBack(dl)
	}
	e := r.lim.Load()
	if e == nil {
		return core.Decision{}, errNotMade
	}
	if n > r.quota && identity != "" {
		// Bad input by the global policy, which the regional limiter's
		// error would measure against the allowance.
		return core.Decision{}, &core.InputError{Arg: "n", Reason: fmt.Sprintf("%d exceeds the quota %d of policy %q: it could never be admitted", n, r.quota, r.cfg.Policy.Name)}
	}
	if n > e.l.Quota() && identity != "" {
		r.asked.Add(n)
		return core.Decision{Allowed: false, Limit: e.l.Quota()}, nil
	}
	d, err := e.l.AllowN(ctx, identity, n)
	if err == nil && n >= 1 {
		r.asked.Add(n)
		if d.Allowed {
			r.used.Add(n)
		}
	}
	return d, err
}

// holdFloor lowers the allowance to the floor at once, until a sync raises
// it again.
func (r *Region) holdFloor() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.toFloor(r.clock.Now())
}

// toFloor enforces the floor from now, and drops the pending fall back to
// it. r.mu must be held.
func (r *Region) toFloor(now time.Time) error {
	r.drop.Store(0)
	return r.enforce(r.floors[r.self], now)
}

// fallBack lowers the allowance to the floor: the region has not synced
// since before its lease (less Hold and a period) ran out.
func (r *Region) fallBack(deadline int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.drop.Load() != deadline {
		return // synced, or fell back, meanwhile
	}
	_ = r.toFloor(r.clock.Now())
}
