package region_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/region"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// cutStore is a coordinator a region may be cut off from.
type cutStore struct {
	s   store.Store
	cut *atomic.Bool
}

func (c cutStore) Update(ctx context.Context, k store.Key, m store.Mutation) error {
	if c.cut.Load() {
		return &store.Error{Op: "update", Err: errors.New("partitioned")}
	}
	return c.s.Update(ctx, k, m)
}

// sim drives regions under one manual clock, in steps of 10 ms: each region
// is offered its demand (units per second) and syncs every period, the
// regions' syncs spread over the period. admitted[w][i] counts what region
// i admitted in the aligned window w.
type sim struct {
	t        *testing.T
	clk      *core.ManualClock
	start    time.Time
	regions  []*region.Region
	cfgs     []region.Config
	cut      []*atomic.Bool
	period   time.Duration
	window   time.Duration
	limit    int64
	owed     []float64
	admitted map[int64][]int64
	demanded map[int64][]int64
}

const step = 10 * time.Millisecond

func newSim(t *testing.T, mode region.Mode, limit int64, n int, tweak func(*region.Config)) *sim {
	t.Helper()
	// A time that is a whole number of windows since the epoch, so windows
	// are counted from 0.
	clk := core.NewManualClock(time.Unix(1_800_000_000, 0))
	s := &sim{t: t, clk: clk, start: clk.Now(), period: 200 * time.Millisecond, window: time.Second, limit: limit,
		owed: make([]float64, n), admitted: map[int64][]int64{}, demanded: map[int64][]int64{}}
	coord := memory.New(&memory.Options{Clock: clk, SweepInterval: -1})
	var members []region.Member
	for i := range n {
		members = append(members, region.Member{Name: fmt.Sprintf("r%d", i), Weight: 1})
	}
	for i := range n {
		cut := &atomic.Bool{}
		cfg := region.Config{
			Mode: mode, Region: members[i].Name, Members: members,
			Limiter: core.Config{
				Policy:    core.Policy{Name: "api", Limit: limit, Window: s.window},
				Algorithm: algorithm.FixedWindow{},
				Store:     memory.New(&memory.Options{Clock: clk, SweepInterval: -1}),
				Clock:     clk,
			},
			Coordinator: cutStore{s: coord, cut: cut},
			SyncPeriod:  s.period,
			Clock:       clk,
		}
		if tweak != nil {
			tweak(&cfg)
		}
		r, err := region.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		s.regions = append(s.regions, r)
		s.cfgs = append(s.cfgs, cfg)
		s.cut = append(s.cut, cut)
	}
	return s
}

// run advances d, offering demand(i, elapsed) units per second to region i.
func (s *sim) run(d time.Duration, demand func(i int, at time.Duration) float64) {
	s.t.Helper()
	ctx := context.Background()
	n := len(s.regions)
	for end := s.clk.Now().Add(d); s.clk.Now().Before(end); s.clk.Advance(step) {
		at := s.clk.Now().Sub(s.start)
		for i, r := range s.regions {
			if (at+time.Duration(i)*s.period/time.Duration(n))%s.period < step {
				_ = r.Sync(ctx) // a cut region's error is the point of the test
			}
		}
		w := int64(at / s.window)
		if s.admitted[w] == nil {
			s.admitted[w], s.demanded[w] = make([]int64, n), make([]int64, n)
		}
		for i, r := range s.regions {
			s.owed[i] += demand(i, at) * step.Seconds()
			for ; s.owed[i] >= 1; s.owed[i]-- {
				s.demanded[w][i]++
				d, err := r.Allow(ctx, "global")
				if err != nil {
					s.t.Fatalf("%s: %v", r.Name(), err)
				}
				if d.Allowed {
					s.admitted[w][i]++
				}
			}
		}
	}
}

// total is the global count admitted in window w.
func (s *sim) total(w int64) int64 {
	var t int64
	for _, a := range s.admitted[w] {
		t += a
	}
	return t
}

// worst is the most any window admitted, and which.
func (s *sim) worst() (int64, int64) {
	var most, at int64
	for w := range s.admitted {
		if t := s.total(w); t > most {
			most, at = t, w
		}
	}
	return most, at
}

// shift offers 3·limit/s to region 0 for the first half, then to region 1;
// region 2 is quiet.
func shift(limit int64, half time.Duration) func(int, time.Duration) float64 {
	return func(i int, at time.Duration) float64 {
		switch {
		case i == 0 && at < half, i == 1 && at >= half:
			return 3 * float64(limit)
		}
		return 0
	}
}

func TestStaticSplitEnforcesWeights(t *testing.T) {
	s := newSim(t, region.Static, 100, 3, func(c *region.Config) {
		c.Members = []region.Member{{Name: "r0", Weight: 2}, {Name: "r1", Weight: 1}, {Name: "r2", Weight: 1}}
	})
	for i, want := range []int64{50, 25, 25} {
		if got := s.regions[i].Allowance(); got != want {
			t.Errorf("%s: allowance %d, want %d", s.regions[i].Name(), got, want)
		}
	}
	s.run(3*time.Second, func(int, time.Duration) float64 { return 200 })
	for w := range int64(3) {
		for i, want := range []int64{50, 25, 25} {
			if got := s.admitted[w][i]; got != want {
				t.Errorf("window %d, %s: admitted %d, want %d", w, s.regions[i].Name(), got, want)
			}
		}
	}
}

func TestStaticSplitWastesWhatAQuietRegionHolds(t *testing.T) {
	s := newSim(t, region.Static, 90, 3, nil)
	s.run(2*time.Second, shift(90, time.Second))
	for w := range int64(2) {
		if got := s.total(w); got != 30 {
			t.Errorf("window %d: admitted %d, want 30 (one region's share)", w, got)
		}
	}
}

func TestSlackAdmitsTheLimitInEveryRegion(t *testing.T) {
	s := newSim(t, region.Slack, 100, 3, nil)
	s.run(2*time.Second, func(int, time.Duration) float64 { return 300 })
	for w := range int64(2) {
		if got, bound := s.total(w), int64(3*100); got != bound {
			t.Errorf("window %d: admitted %d, want the worst case N × Limit = %d", w, got, bound)
		}
	}
}

func TestSyncedFollowsDemandWithinTheLimit(t *testing.T) {
	const limit = 100
	// A shift on a window's edge, and one in the middle of a window: the
	// hold keeps what the region that lost demand admitted in the window
	// from being handed over before the window ends.
	for _, at := range []time.Duration{6 * time.Second, 6500 * time.Millisecond, 6900 * time.Millisecond} {
		s := newSim(t, region.Synced, limit, 3, nil)
		s.run(12*time.Second, shift(limit, at))
		for w := int64(0); w < 12; w++ {
			if got := s.total(w); got > limit {
				t.Errorf("shift at %v, window %d: admitted %d > limit %d (%v)", at, w, got, limit, s.admitted[w])
			}
		}
		// Once the shares have followed the demand (a few periods, plus
		// the hold after the shift), the busy region gets all but the
		// others' floors: floors are 100/12 = 8 each.
		for _, w := range []int64{3, 4, 5, 9, 10, 11} {
			if got := s.total(w); got < limit-2*8-3 {
				t.Errorf("shift at %v, window %d: admitted %d, want at least %d (%v)", at, w, got, limit-2*8-3, s.admitted[w])
			}
		}
	}
}

// Without the hold, a region that lowers its allowance hands it over at
// once, and a window may count both: the bound of the package doc,
// Limit + (Limit − Σ floors), is reached, never passed.
func TestSyncedWithoutHoldOverAdmitsWithinTheBound(t *testing.T) {
	const limit = 100
	s := newSim(t, region.Synced, limit, 3, func(c *region.Config) { c.Hold = -1 })
	s.run(8*time.Second, shift(limit, 4200*time.Millisecond))
	most, w := s.worst()
	if most <= limit {
		t.Fatalf("worst window admitted %d: the shift should have over-admitted without a hold", most)
	}
	if bound := int64(limit + (limit - 3*8)); most > bound {
		t.Errorf("window %d admitted %d > bound %d (%v)", w, most, bound, s.admitted[w])
	}
}

func TestPartitionedRegionKeepsItsAllowanceThenItsFloor(t *testing.T) {
	const limit = 100
	s := newSim(t, region.Synced, limit, 3, nil)
	busy := func(i int, _ time.Duration) float64 {
		if i == 0 {
			return 300
		}
		return 0
	}
	s.run(3*time.Second, busy)
	r0 := s.regions[0]
	before := r0.Allowance()
	if before < limit-2*8-3 {
		t.Fatalf("busy region's allowance %d before the partition", before)
	}
	s.cut[0].Store(true)
	// Lease is (Hold/period + 4)·period = 1.8 s: the region keeps its
	// allowance for Lease − Hold − period = 0.6 s after its last sync.
	s.run(400*time.Millisecond, busy)
	if got := r0.Allowance(); got != before {
		t.Errorf("0.4 s into the partition: allowance %d, want %d kept", got, before)
	}
	s.run(400*time.Millisecond, busy)
	if got := r0.Allowance(); got != 8 {
		t.Errorf("0.8 s into the partition: allowance %d, want the floor 8", got)
	}
	// Region 1 takes the dark region's share only after its lease: then
	// within one period.
	shiftTo1 := func(i int, _ time.Duration) float64 {
		if i == 1 {
			return 300
		}
		return 0
	}
	s.run(800*time.Millisecond, shiftTo1) // 1.6 s: before the lease ends
	if got := s.regions[1].Allowance(); got > limit-before {
		t.Errorf("region 1 took %d before r0's lease ended; r0 held %d", got, before)
	}
	s.run(600*time.Millisecond, shiftTo1) // lease (1.8 s after the last read) + one period
	if got, want := s.regions[1].Allowance(), int64(limit-2*8-3); got < want {
		t.Errorf("after r0's lease and a period: region 1's allowance %d, want at least %d", got, want)
	}
	// r0 returns with demand: it gets its share back as region 1's hold
	// runs out, never a window above the limit.
	s.cut[0].Store(false)
	both := func(i int, _ time.Duration) float64 {
		if i < 2 {
			return 300
		}
		return 0
	}
	s.run(4*time.Second, both)
	for w, a := range s.admitted {
		if got := s.total(w); got > limit {
			t.Errorf("window %d: admitted %d > limit %d (%v)", w, got, limit, a)
		}
	}
	if got := r0.Allowance(); got < 35 {
		t.Errorf("returned region's allowance %d after 4 s of equal demand, want about 42", got)
	}
}

func TestConfigErrors(t *testing.T) {
	base := func() region.Config {
		return region.Config{
			Mode: region.Synced, Region: "a",
			Members: []region.Member{{Name: "a"}, {Name: "b"}},
			Limiter: core.Config{
				Policy:    core.PerSecond("api", 100),
				Algorithm: algorithm.GCRA{},
				Store:     memory.New(nil),
			},
			Coordinator: memory.New(nil),
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*region.Config)
	}{
		{"unknown region", func(c *region.Config) { c.Region = "x" }},
		{"no members", func(c *region.Config) { c.Members = nil }},
		{"duplicate member", func(c *region.Config) { c.Members[1].Name = "a" }},
		{"bad name", func(c *region.Config) { c.Members[1].Name = "b c" }},
		{"negative weight", func(c *region.Config) { c.Members[0].Weight = -1 }},
		{"floors above limit", func(c *region.Config) { c.Members[0].Floor, c.Members[1].Floor = 60, 41 }},
		{"no coordinator", func(c *region.Config) { c.Coordinator = nil }},
		{"lease too short", func(c *region.Config) { c.LeasePeriods = 2 }},
		{"bad policy", func(c *region.Config) { c.Limiter.Policy.Limit = 0 }},
		{"leases", func(c *region.Config) { c.Limiter.Algorithm = algorithm.Concurrency{} }},
		{"unknown mode", func(c *region.Config) { c.Mode = 7 }},
		{"typed-nil algorithm", func(c *region.Config) { var g *algorithm.GCRA; c.Limiter.Algorithm = g }},
		// A decision with no deadline may be admitted under an allowance
		// lowered long before, after another region was given it.
		{"no deadline", func(c *region.Config) { c.Limiter.Timeout = -1 }},
		// A region named "region" would count its clients on the keys of
		// the coordinator's reports, were the two stores one.
		{"reserved name", func(c *region.Config) { c.Members[1].Name = "region" }},
		// A synced region may be given all but the others' floors: a
		// sliding log of 30,000 could not enforce 29,750 (its Limit is at
		// most 10,000), and every raise would fail at Sync.
		{"largest allowance invalid", func(c *region.Config) {
			c.Limiter.Policy, c.Limiter.Algorithm = core.PerMinute("log", 30000), algorithm.SlidingLog{}
		}},
		{"static share of zero", func(c *region.Config) {
			c.Mode = region.Static
			c.Limiter.Policy.Limit = 2
			c.Members = []region.Member{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}, {Name: "c", Weight: 1}}
		}},
	} {
		c := base()
		tc.edit(&c)
		if _, err := region.New(c); err == nil {
			t.Errorf("%s: New accepted %+v", tc.name, c)
		}
	}
	if _, err := region.New(base()); err != nil {
		t.Errorf("base config: %v", err)
	}
	// A month's window holds its allowance longer than a lease may be: the
	// error says so, not that a field never set is wrong.
	month := base()
	month.Limiter.Policy, month.Limiter.Algorithm = core.Policy{Name: "month", Limit: 1000, Window: core.MaxWindow}, algorithm.FixedWindow{}
	if _, err := region.New(month); err == nil || !strings.Contains(err.Error(), "default lease") || strings.Contains(err.Error(), "got 0") {
		t.Errorf("a synced split of a %s window: %v; want an error naming the default lease and Hold", core.MaxWindow, err)
	}
	// The default lease keeps the allowance three periods past the hold and
	// the limiter's Timeout, however short the period.
	c := base()
	c.SyncPeriod = 10 * time.Millisecond
	if r, err := region.New(c); err != nil {
		t.Errorf("a 10 ms period: %v", err)
	} else if got, want := r.Lease(), time.Second+100*time.Millisecond+3*c.SyncPeriod; got != want {
		t.Errorf("a 10 ms period: lease %v, want %v", got, want)
	}
}

func TestCostAboveTheAllowanceIsARefusal(t *testing.T) {
	r, err := region.New(region.Config{
		Mode: region.Static, Region: "a",
		Members: []region.Member{{Name: "a"}, {Name: "b"}},
		Limiter: core.Config{Policy: core.PerSecond("api", 100), Algorithm: algorithm.GCRA{}, Store: memory.New(nil)},
	})
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.AllowN(context.Background(), "k", 80)
	if err != nil || d.Allowed {
		t.Errorf("AllowN(80) over a share of 50: %+v, %v; want a refusal", d, err)
	}
	if _, err := r.AllowN(context.Background(), "k", 101); !errors.Is(err, core.ErrInvalidInput) || !strings.Contains(err.Error(), "quota 100 ") {
		t.Errorf("AllowN(101) over the global limit: %v, want ErrInvalidInput naming the global quota, 100", err)
	}
}

// slowStore advances the clock by delay during each Update, while slow.
type slowStore struct {
	s     store.Store
	clk   *core.ManualClock
	delay time.Duration
	slow  *atomic.Bool
}

func (s slowStore) Update(ctx context.Context, k store.Key, m store.Mutation) error {
	if s.slow.Load() {
		s.clk.Advance(s.delay)
	}
	return s.s.Update(ctx, k, m)
}

// A sync that outlasts the region's lease on its last report cannot keep
// the allowance: the others may have taken it meanwhile.
func TestSyncSlowerThanTheLeaseHoldsTheFloor(t *testing.T) {
	const limit = 100
	slow := &atomic.Bool{}
	s := newSim(t, region.Synced, limit, 2, func(c *region.Config) {
		if c.Region == "r0" {
			c.Coordinator = slowStore{s: c.Coordinator, clk: c.Clock.(*core.ManualClock), delay: time.Second, slow: slow}
		}
	})
	busy := func(i int, _ time.Duration) float64 {
		if i == 0 {
			return 300
		}
		return 0
	}
	s.run(3*time.Second, busy)
	r0 := s.regions[0]
	if got := r0.Allowance(); got < 80 {
		t.Fatalf("r0's allowance %d before the slow sync", got)
	}
	// Lease 1.8 s: three store calls of 1 s each take the sync past it.
	slow.Store(true)
	err := r0.Sync(context.Background())
	slow.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	if got, floor := r0.Allowance(), int64(limit/8); got != floor {
		t.Errorf("after a sync of 3 s: allowance %d, want the floor %d", got, floor)
	}
	s.run(time.Second, busy)
	if got := r0.Allowance(); got < 80 {
		t.Errorf("a second after: allowance %d, want it raised again", got)
	}
}

// A region restarted mid-window (a new process, the same regional store)
// finds its old claim in the coordinator and holds it to the end of the
// window: what the old process admitted is still counted there.
func TestRestartedRegionHoldsItsOldClaim(t *testing.T) {
	checkRestart(t, newSim(t, region.Synced, 100, 2, nil), nil)
}

// checkRestart runs s's r0 busy, restarts it mid-window (after lose, when
// set, takes the coordinator's reports), moves the demand to r1, and
// checks that no window passes the limit of 100 and that r1 then has most
// of it.
func checkRestart(t *testing.T, s *sim, lose func()) {
	const limit = 100
	s.run(3500*time.Millisecond, func(i int, _ time.Duration) float64 {
		if i == 0 {
			return 300
		}
		return 0
	})
	if got := s.regions[0].Allowance(); got < 80 {
		t.Fatalf("r0's allowance %d before the restart", got)
	}
	if lose != nil {
		lose()
	}
	r, err := region.New(s.cfgs[0])
	if err != nil {
		t.Fatal(err)
	}
	s.regions[0] = r
	s.run(2500*time.Millisecond, func(i int, _ time.Duration) float64 {
		if i == 1 {
			return 300
		}
		return 0
	})
	for w, a := range s.admitted {
		if got := s.total(w); got > limit {
			t.Errorf("window %d: admitted %d > limit %d (%v)", w, got, limit, a)
		}
	}
	if got := s.regions[1].Allowance(); got < 80 {
		t.Errorf("r1's allowance %d after the old claim's window ended, want most of the limit", got)
	}
}

// flushable is a coordinator that can lose its data, as a redis-server
// without persistence does when it restarts, or any store on FLUSHALL.
type flushable struct {
	cur atomic.Pointer[memory.Store]
	clk core.Clock
}

func (f *flushable) flush() {
	f.cur.Store(memory.New(&memory.Options{Clock: f.clk, SweepInterval: -1}))
}

func (f *flushable) Update(ctx context.Context, k store.Key, m store.Mutation) error {
	return f.cur.Load().Update(ctx, k, m)
}

// A coordinator that loses every report (restarted empty, flushed,
// evicted) must not let one region take the others' shares while they
// still enforce them: a report that vanished is counted as unknown (any
// claim) until the lease on what was last read of it ends, as a region
// cut off is, and the regions then split the limit again.
func TestCoordinatorDataLossKeepsTheLimit(t *testing.T) {
	const limit = 100
	var coord *flushable
	s := newSim(t, region.Synced, limit, 3, func(c *region.Config) {
		if coord == nil {
			coord = &flushable{clk: c.Clock}
			coord.flush()
		}
		c.Coordinator = coord
	})
	busy := func(i int, _ time.Duration) float64 {
		if i < 2 {
			return 3 * limit
		}
		return 0
	}
	s.run(4100*time.Millisecond, busy) // the shares settle, then the data is lost mid-window
	coord.flush()
	s.run(4900*time.Millisecond, busy)
	for w := int64(0); w < 9; w++ {
		if s.total(w) > limit {
			t.Errorf("window %d: %d admitted %v, over the limit of %d", w, s.total(w), s.admitted[w], limit)
		}
	}
	if got := s.total(8); got < limit/2 {
		t.Errorf("window 8, four seconds after the loss: %d admitted %v; want the split back above %d", got, s.admitted[8], limit/2)
	}
}

// A region restarted after the coordinator lost its report cannot read
// what it claimed before, which its regional store's window still
// counts: it must claim the whole limit until its hold ends, as the
// others count a report that vanished, and not only its floor.
func TestRestartAfterCoordinatorDataLossKeepsTheLimit(t *testing.T) {
	var coord *flushable
	s := newSim(t, region.Synced, 100, 2, func(c *region.Config) {
		if coord == nil {
			coord = &flushable{clk: c.Clock}
			coord.flush()
		}
		c.Coordinator = coord
	})
	checkRestart(t, s, func() { coord.flush() })
}

// snapshotting is a coordinator that can go back to an earlier state of
// its data, as a redis-server restarted from its last RDB snapshot does,
// or a replica promoted before it had every write. Its keys never expire:
// a test's seconds are far within a report's TTL.
type snapshotting struct {
	mu   sync.Mutex
	data map[string][]byte
}

func (c *snapshotting) Update(_ context.Context, k store.Key, m store.Mutation) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.data == nil {
		c.data = map[string][]byte{}
	}
	next, ttl := m.Apply(bytes.Clone(c.data[k.String()]))
	switch {
	case next == nil:
	case ttl <= 0:
		delete(c.data, k.String())
	default:
		c.data[k.String()] = bytes.Clone(next)
	}
	return nil
}

func (c *snapshotting) snapshot() map[string][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.data)
}

func (c *snapshotting) restore(d map[string][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.data = maps.Clone(d)
}

// A coordinator that goes back to an earlier snapshot shows a region's
// old report, whose claim may be far below what the region enforces now:
// a report older than one already read is counted as a lost one (any claim
// until the lease on what was read ends), not as a fresh one. Here r1's
// snapshot claims its floor while it enforces most of the limit, and r2
// turns busy as the snapshot comes back.
func TestCoordinatorBackToASnapshotKeepsTheLimit(t *testing.T) {
	const limit = 100
	coord := &snapshotting{}
	s := newSim(t, region.Synced, limit, 3, func(c *region.Config) { c.Coordinator = coord })
	phase := func(busy ...int) func(int, time.Duration) float64 {
		return func(i int, _ time.Duration) float64 {
			if slices.Contains(busy, i) {
				return 3 * limit
			}
			return 0
		}
	}
	s.run(3500*time.Millisecond, phase(2))
	snap := coord.snapshot()
	s.run(4700*time.Millisecond, phase(1))
	s.run(50*time.Millisecond, phase(1, 2))
	coord.restore(snap)
	s.run(3750*time.Millisecond, phase(1, 2))
	for w := int64(0); w < 12; w++ {
		if s.total(w) > limit {
			t.Errorf("window %d: %d admitted %v, over the limit of %d", w, s.total(w), s.admitted[w], limit)
		}
	}
	if got := s.total(11); got < limit*3/4 {
		t.Errorf("window 11, three seconds after the snapshot came back: %d admitted %v; want the split back above %d", got, s.admitted[11], limit*3/4)
	}
}

// deadCoordinator is a coordination store whose every call fails.
type deadCoordinator struct{}

func (deadCoordinator) Update(context.Context, store.Key, store.Mutation) error {
	return &store.Error{Op: "update", Err: errors.New("connection refused")}
}

// Run hears nothing of a failed Sync but through OnSyncError: a split whose
// syncs keep failing holds every region at its floor, silently otherwise.
func TestRunReportsFailedSyncs(t *testing.T) {
	var failed atomic.Int64
	r, err := region.New(region.Config{
		Mode: region.Synced, Region: "a",
		Members:     []region.Member{{Name: "a"}, {Name: "b"}},
		Limiter:     core.Config{Policy: core.PerSecond("api", 100), Algorithm: algorithm.GCRA{}, Store: memory.New(nil)},
		Coordinator: deadCoordinator{}, SyncPeriod: 5 * time.Millisecond,
		OnSyncError: func(err error) {
			if errors.Is(err, core.ErrUnavailable) {
				failed.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = r.Run(ctx)
	if failed.Load() == 0 {
		t.Error("Run ran 200 ms against a coordinator that fails every call, and OnSyncError heard no error matching core.ErrUnavailable")
	}
}

// A Sync whose reads of the other regions' reports all fail alike says
// the store's error once, naming the regions: three regions' reads failed
// with one line repeated per region.
func TestSyncErrorSaysEachFailureOnce(t *testing.T) {
	r, err := region.New(region.Config{
		Mode: region.Synced, Region: "a",
		Members:     []region.Member{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}},
		Limiter:     core.Config{Policy: core.PerSecond("api", 100), Algorithm: algorithm.GCRA{}, Store: memory.New(nil)},
		Coordinator: deadCoordinator{},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Sync(context.Background())
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Sync against a dead coordinator: %v, want an error matching core.ErrUnavailable", err)
	}
	if n := strings.Count(err.Error(), "connection refused"); n != 1 {
		t.Errorf("Sync's error says the store's error %d times, want once:\n%v", n, err)
	}
	if !strings.Contains(err.Error(), "b, c, d") {
		t.Errorf("Sync's error does not name the regions whose reports it could not read (b, c, d):\n%v", err)
	}
}

// A typed nil Clock is refused by New, which would otherwise panic on it.
func TestTypedNilClockRefused(t *testing.T) {
	var clk *core.ManualClock
	_, err := region.New(region.Config{
		Mode: region.Synced, Region: "a", Clock: clk,
		Members:     []region.Member{{Name: "a"}, {Name: "b"}},
		Limiter:     core.Config{Policy: core.PerSecond("api", 100), Algorithm: algorithm.GCRA{}, Store: memory.New(nil)},
		Coordinator: memory.New(nil),
	})
	if err == nil || !strings.Contains(err.Error(), "Clock is nil") {
		t.Fatalf("region.New with a nil *ManualClock: %v, want an error saying Clock is nil", err)
	}
}

// A Region that New did not make has no limiter to decide with: it says so
// with an error, as a zero core.Limiter does, and its getters answer zero
// values instead of panicking.
func TestZeroRegionReturnsAnError(t *testing.T) {
	var r region.Region
	if _, err := r.Allow(context.Background(), "a"); err == nil || !strings.Contains(err.Error(), "not made by New") {
		t.Fatalf("Allow on a zero Region: err = %v, want one saying it was not made by New", err)
	}
	if _, err := r.AllowN(context.Background(), "a", 2); err == nil {
		t.Fatal("AllowN on a zero Region: no error")
	}
	if r.Name() != "" || r.Allowance() != 0 || r.Limiter() != nil {
		t.Fatalf("zero Region: Name %q, Allowance %d, Limiter %v; want zero values", r.Name(), r.Allowance(), r.Limiter())
	}
}

// Two processes of one region, each its own Member on the region's one
// store (as the Region doc says they must be), count on keys of their own:
// each admits its own share, so the region admits both shares, not one.
func TestMembersSharingARegionalStoreCountApart(t *testing.T) {
	regional := memory.New(nil)
	t.Cleanup(func() { _ = regional.Close() })
	members := []region.Member{{Name: "eu-1"}, {Name: "eu-2"}}
	admitted := 0
	for _, m := range members {
		r, err := region.New(region.Config{
			Mode: region.Static, Region: m.Name, Members: members,
			Limiter: core.Config{Policy: core.Policy{Name: "api", Limit: 100, Window: time.Hour}, Algorithm: algorithm.FixedWindow{}, Store: regional},
		})
		if err != nil {
			t.Fatal(err)
		}
		for range 80 {
			if d, err := r.Allow(context.Background(), "client"); err == nil && d.Allowed {
				admitted++
			}
		}
	}
	if admitted != 100 {
		t.Errorf("two members of one store, shares of 50 each: %d admitted in all, want 100", admitted)
	}
	// A member's keys are named after it, under the limiter's prefix: a
	// prefix and a name too long together are refused at New.
	_, err := region.New(region.Config{
		Mode: region.Static, Region: strings.Repeat("r", 40), Members: []region.Member{{Name: strings.Repeat("r", 40)}},
		Limiter: core.Config{Policy: core.PerSecond("api", 10), Algorithm: algorithm.GCRA{}, Store: regional, Prefix: strings.Repeat("p", 30)},
	})
	if err == nil || !strings.Contains(err.Error(), "Prefix") {
		t.Errorf("a prefix and a region name of 71 characters in all: %v, want an error naming the Prefix", err)
	}
}

// Regions given different SyncPeriods (or leases, or holds) cannot keep
// the bound: a sync that reads another region's report of another timing
// writes its own and fails, saying so, so that the other reads the
// mismatch at its next sync and fails too, whichever wrote first; both
// hold their floors, never more than the limit in all.
func TestMismatchedTimingIsASyncError(t *testing.T) {
	checkMismatch(t, [2]time.Duration{200 * time.Millisecond, 2500 * time.Millisecond}, [2]int64{100, 100}, "same SyncPeriod")
}

// So is a Limit that differs, as in a rolling change of it: the regions
// would split two limits, and admit more than the smaller.
func TestMismatchedLimitIsASyncError(t *testing.T) {
	checkMismatch(t, [2]time.Duration{200 * time.Millisecond, 200 * time.Millisecond}, [2]int64{100, 300}, "same Limiter.Policy")
}

// A region that reads a report of another Limit holds its floor at once,
// not only once its lease runs out: the allowance it had may be more than
// the other's limit leaves it (a rolling change of the Limit).
func TestMismatchHoldsTheFloorAtOnce(t *testing.T) {
	clk := core.NewManualClock(time.Unix(1_800_000_000, 0))
	coord := memory.New(&memory.Options{Clock: clk, SweepInterval: -1})
	t.Cleanup(func() { _ = coord.Close() })
	mk := clockedRegions(t, clk, []string{"a", "b"}, 200*time.Millisecond)
	a, b := mk("a", 100, coord), mk("b", 100, coord)
	ctx := context.Background()
	for range 40 { // a busy, b quiet, until a holds most of the limit
		for range 30 {
			_, _ = a.Allow(ctx, "global")
		}
		_ = a.Sync(ctx)
		_ = b.Sync(ctx)
		clk.Advance(100 * time.Millisecond)
	}
	if got := a.Allowance(); got < 50 {
		t.Fatalf("a's allowance %d before the change; want most of 100", got)
	}
	b = mk("b", 60, coord) // b restarted with the new Limit
	if err := b.Sync(ctx); err == nil {
		t.Fatal("b's sync beside a region of another Limit succeeded")
	}
	if err := a.Sync(ctx); err == nil || !strings.Contains(err.Error(), "same Limiter.Policy") {
		t.Fatalf("a's sync: %v, want the mismatch", err)
	}
	if got := a.Allowance(); got != 100/8 {
		t.Errorf("a's allowance %d right after it read the mismatch; want its floor, %d", got, 100/8)
	}
}

// clockedRegions returns a maker of synced regions of the given members on
// clk, each with a memory store of its own, a policy of limit a second and
// the given coordinator.
func clockedRegions(t *testing.T, clk core.Clock, names []string, period time.Duration) func(name string, limit int64, coord store.Store) *region.Region {
	var members []region.Member
	for _, n := range names {
		members = append(members, region.Member{Name: n})
	}
	return func(name string, limit int64, coord store.Store) *region.Region {
		st := memory.New(&memory.Options{Clock: clk, SweepInterval: -1})
		t.Cleanup(func() { _ = st.Close() })
		r, err := region.New(region.Config{
			Mode: region.Synced, Region: name, Members: members,
			Limiter:     core.Config{Policy: core.PerSecond("api", limit), Algorithm: algorithm.FixedWindow{}, Store: st, Clock: clk},
			Coordinator: coord, SyncPeriod: period, Clock: clk,
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// raiseHook is a coordinator that runs fire after a region's write of its
// own report, with the claim it wrote: between a raising sync's write and
// its second read.
type raiseHook struct {
	store.Store
	fire func(claim int64)
}

// captured keeps what a mutation wrote.
type captured struct {
	store.Mutation
	next []byte
}

func (c *captured) Apply(s []byte) ([]byte, time.Duration) {
	n, ttl := c.Mutation.Apply(s)
	c.next = bytes.Clone(n)
	return n, ttl
}

func (h *raiseHook) Update(ctx context.Context, k store.Key, m store.Mutation) error {
	if !strings.Contains(fmt.Sprintf("%T", m), "writeReport") || h.fire == nil {
		return h.Store.Update(ctx, k, m)
	}
	c := &captured{Mutation: m}
	err := h.Store.Update(ctx, k, c)
	var rep struct {
		C int64 `json:"c"`
	}
	if err == nil && json.Unmarshal(c.next, &rep) == nil {
		h.fire(rep.C)
	}
	return err
}

// A raising sync reads the others again after its write; a report of
// another Limit first seen there fails the sync and holds the floor, as
// one seen in the first read does, rather than letting the raise stand.
func TestMismatchOnTheSecondReadHoldsTheFloor(t *testing.T) {
	clk := core.NewManualClock(time.Unix(1_800_000_000, 0))
	coord := memory.New(&memory.Options{Clock: clk, SweepInterval: -1})
	t.Cleanup(func() { _ = coord.Close() })
	mk := clockedRegions(t, clk, []string{"a", "b", "c"}, 50*time.Millisecond)
	hook := &raiseHook{Store: coord}
	a, b, c := mk("a", 100, coord), mk("b", 100, hook), mk("c", 100, coord)
	a2 := mk("a", 60, coord) // a, restarted with the new Limit
	ctx := context.Background()
	fired := false
	var berr error
	for i := 0; i < 200 && !fired; i++ {
		busy := b // b busy, then a (b's share falls), then b again: a raise
		if i >= 20 && i < 60 {
			busy = a
		}
		for range 20 {
			_, _ = busy.Allow(ctx, "x")
		}
		_ = a.Sync(ctx)
		_ = c.Sync(ctx)
		cur := b.Allowance()
		if i >= 60 {
			hook.fire = func(claim int64) {
				if claim > cur && !fired {
					fired = true
					_ = a2.Sync(ctx) // a's first report of the new Limit, read by b's second read only
				}
			}
		}
		berr = b.Sync(ctx)
		hook.fire = nil
		clk.Advance(50 * time.Millisecond)
	}
	if !fired {
		t.Fatal("b never raised its allowance")
	}
	if berr == nil || !strings.Contains(berr.Error(), "same Limiter.Policy") {
		t.Errorf("b's raising sync that read a's new Limit on its second read: %v; want the mismatch", berr)
	}
	if got := b.Allowance(); got != 100/12 {
		t.Errorf("b's allowance %d after it; want its floor, %d", got, 100/12)
	}
}

// checkMismatch makes two regions of the given SyncPeriods and Limits, and
// checks that their syncs fail saying so, each at its floor.
func checkMismatch(t *testing.T, periods [2]time.Duration, limits [2]int64, says string) {
	t.Helper()
	coord := memory.New(nil)
	t.Cleanup(func() { _ = coord.Close() })
	members := []region.Member{{Name: "a"}, {Name: "b"}}
	var rs []*region.Region
	for i := range 2 {
		st := memory.New(nil)
		t.Cleanup(func() { _ = st.Close() })
		r, err := region.New(region.Config{
			Mode: region.Synced, Region: members[i].Name, Members: members,
			Limiter:     core.Config{Policy: core.PerSecond("api", limits[i]), Algorithm: algorithm.FixedWindow{}, Store: st},
			Coordinator: coord, SyncPeriod: periods[i],
		})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	ctx := context.Background()
	if err := rs[0].Sync(ctx); err != nil {
		t.Fatalf("the first region's sync, alone so far: %v", err)
	}
	for range 3 {
		for _, r := range []*region.Region{rs[1], rs[0]} {
			if err := r.Sync(ctx); err == nil || !strings.Contains(err.Error(), says) {
				t.Fatalf("%s: a sync beside a mismatched region: %v, want an error saying %q", r.Name(), err, says)
			}
		}
	}
	for i, r := range rs {
		if got, floor := r.Allowance(), limits[i]/8; got != floor {
			t.Errorf("%s: allowance %d, want its floor, %d", r.Name(), got, floor)
		}
	}
}
