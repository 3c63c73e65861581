package guard

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/core"

	"github.com/sluicehq/sluice/store"
)

// Defaults for the fields of FleetOptions.
const (
	// DefaultFleetName names the heartbeat key when FleetOptions.Name is
	// empty.
	DefaultFleetName = "fleet"
	// DefaultHeartbeat is the interval between an instance's heartbeats.
	DefaultHeartbeat = time.Second
	// DefaultMaxInstances bounds the instances one heartbeat key counts
	// (16 bytes each).
	DefaultMaxInstances = 1024
	// maxInstances is the most FleetOptions.MaxInstances can ask for.
	maxInstances = 1 << 16
	// The range of FleetOptions.Interval and the most Expiry can be.
	minHeartbeat, maxHeartbeat = 10 * time.Millisecond, 24 * time.Hour
	maxExpiry                  = 7 * 24 * time.Hour
)

// FleetOptions configures a Fleet.
type FleetOptions struct {
	// Size is the fleet's size when no heartbeat has been read: fixed
	// when Store is nil, the first guess otherwise. Zero means 1; at most
	// 65,536.
	Size int
	// Store, when set, receives each instance's heartbeats (one key,
	// updated atomically), and the fleet is counted from them while the
	// store answers. During an outage the last count is kept. On a store
	// that runs scripts (store.ScriptRunner: Redis, Valkey) a heartbeat is
	// one script over a sorted set, on the server's clock, which never
	// loses a race; on another (memcached) it is a read and a
	// compare-and-swap of one item, which takes about one heartbeat per
	// two round trips, and heartbeats that overlap retry within Timeout
	// (Fleets that share one Store in one process also wait their turn in
	// its queue, within the same Timeout). Measured with the instances
	// spread over four processes: on loopback memcached 1,000 are all
	// counted within 2.6 s at the defaults; 10 ms away, 100 need a Timeout
	// of 1 s, and 300 are not all counted whatever the Timeout. For a
	// fleet that large or that far, lengthen Interval and Expiry, not only
	// Timeout. (Instances of releases before the script beat to another
	// key: during a rollout the two kinds do not count each other.)
	Store store.Store
	// Prefix and Name name the heartbeat key: instances with the same
	// Prefix and Name count one another. Defaults core.DefaultPrefix and
	// DefaultFleetName; the same rules as Config.Prefix and Policy.Name.
	Prefix, Name string
	// Interval is the time between heartbeats, from 10ms to 24h. Zero
	// means DefaultHeartbeat (1 s). Each heartbeat is jittered by up to a
	// tenth of it, and the first after NewFleet's comes anywhere from half
	// an Interval to one and a half, so that instances started together do
	// not beat together.
	Interval time.Duration
	// Expiry is how long an instance is counted after its last heartbeat:
	// at least 2 × Interval (an instance would otherwise drop out of the
	// count whenever one heartbeat is late, and the others' shares grow),
	// at most 7 days. Zero means 3 × Interval.
	Expiry time.Duration
	// MaxInstances bounds the instances counted (the most recent writers
	// are kept). Zero means DefaultMaxInstances (1024); more than 65,536
	// means 65,536; negative is an error. Every instance sharing the
	// heartbeat key should give the same: each beat keeps only its own
	// MaxInstances.
	MaxInstances int
	// Timeout bounds each heartbeat. Zero means core.DefaultTimeout;
	// negative is an error.
	Timeout time.Duration
}

// Fleet knows how many instances share a limit: configured, or counted
// from the heartbeats they write to the store. It is safe for concurrent
// use. Close stops its heartbeats.
type Fleet struct {
	size atomic.Int64
	// mu guards settled: a count below Size is taken only from settled
	// on, Expiry after the first heartbeat that reached the store since
	// the start or since one that did not (which zero it).
	mu       sync.Mutex
	settled  time.Time
	id       uint64
	o        FleetOptions
	key      store.Key // the heartbeats' item, on a store without scripts
	setKey   store.Key // their sorted set, on a store with (heartbeatScript)
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	closed   atomic.Bool
}

// NewFleet returns a Fleet. With a Store, it writes its first heartbeat
// before it returns (within Timeout; a failure keeps the Size guess) and
// then one every Interval, in a goroutine that Close stops.
func NewFleet(opts *FleetOptions) (*Fleet, error) {
	var o FleetOptions
	if opts != nil {
		o = *opts
	}
	if o.Size < 0 || o.Size > maxInstances {
		return nil, fmt.Errorf("sluice: FleetOptions.Size must be from 0 to %d, got %d", maxInstances, o.Size)
	}
	o.Size = max(o.Size, 1)
	if o.Prefix == "" {
		o.Prefix = core.DefaultPrefix
	}
	if o.Name == "" {
		o.Name = DefaultFleetName
	}
	if o.Interval == 0 {
		o.Interval = DefaultHeartbeat
	}
	if o.Interval < minHeartbeat || o.Interval > maxHeartbeat {
		return nil, fmt.Errorf("sluice: FleetOptions.Interval must be from %s to %s, got %s", minHeartbeat, maxHeartbeat, o.Interval)
	}
	if o.Expiry == 0 {
		o.Expiry = 3 * o.Interval
	}
	if o.Expiry < 2*o.Interval || o.Expiry > maxExpiry {
		return nil, fmt.Errorf("sluice: FleetOptions.Expiry must be from 2 × Interval (%s) to %s, got %s", 2*o.Interval, maxExpiry, o.Expiry)
	}
	if o.MaxInstances < 0 || o.Timeout < 0 {
		return nil, fmt.Errorf("sluice: FleetOptions.MaxInstances (%d) and Timeout (%s) must not be negative", o.MaxInstances, o.Timeout)
	}
	if o.MaxInstances == 0 {
		o.MaxInstances = DefaultMaxInstances
	}
	// A heartbeat item holds 16 bytes an instance and is rewritten whole
	// by every beat: beyond 1<<16 instances a beat would allocate more
	// than a megabyte (and at math.MaxInt, fail to).
	o.MaxInstances = min(o.MaxInstances, maxInstances)
	if o.Timeout == 0 {
		o.Timeout = core.DefaultTimeout
	}
	// The heartbeat key is named as a policy's keys are: check it the same
	// way.
	if _, err := core.New(core.Config{Policy: core.PerSecond(o.Name, 1), Algorithm: nopAlgorithm{}, Store: nopStore{}, Prefix: o.Prefix}); err != nil {
		return nil, err
	}
	ns := store.Namespace(o.Prefix, o.Name)
	f := &Fleet{id: rand.Uint64() | 1, o: o, key: store.Key{Namespace: ns, Identity: "heartbeats"}, setKey: store.Key{Namespace: ns, Identity: "heartbeat-set"}}
	f.size.Store(int64(o.Size))
	if o.Store == nil {
		return f, nil
	}
	if store.IsNil(o.Store) {
		return nil, errors.New("guard: FleetOptions.Store is a nil pointer")
	}
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	_ = f.Beat(context.Background())
	go f.run()
	return f, nil
}

// Size is the number of instances counted at the last heartbeat that
// reached the store (or the configured Size). It is at least 1. It does not
// fall until this instance has beaten for Expiry since it started, or
// since a heartbeat that did not reach the store: the others' heartbeats
// may have expired meanwhile, and the first beats that get through count
// only the instances that beat since.
func (f *Fleet) Size() int { return max(int(f.size.Load()), 1) }

// Close stops the heartbeats; Beat returns an error from then on. The
// instance stops being counted by the others after Expiry.
func (f *Fleet) Close() error {
	f.closed.Store(true)
	if f.stop != nil {
		f.stopOnce.Do(func() { close(f.stop) })
		<-f.done
	}
	return nil
}

func (f *Fleet) run() {
	defer close(f.done)
	// The first wait is anywhere from half an Interval to one and a half,
	// so that instances started together (a rollout) do not beat together
	// ever after: each later beat keeps its phase, give or take its
	// jitter. Within Expiry (at least 2 × Interval) either way.
	wait := f.o.Interval/2 + rand.N(f.o.Interval)
	for {
		select {
		case <-f.stop:
			return
		case <-time.After(wait):
		}
		_ = f.Beat(context.Background())
		wait = f.o.Interval - f.o.Interval/10 + rand.N(f.o.Interval/10+1)
	}
}

// Beat writes one heartbeat now and updates Size from the count it read.
// A failure leaves Size as it was. After Close it writes nothing and
// returns an error: a closed instance renewing its heartbeat would be
// counted for another Expiry.
func (f *Fleet) Beat(ctx context.Context) error {
	if f.o.Store == nil {
		return errors.New("sluice: the fleet has no Store to beat to")
	}
	if f.closed.Load() {
		return errors.New("sluice: Beat on a closed Fleet")
	}
	ctx, cancel := context.WithTimeout(ctx, f.o.Timeout)
	defer cancel()
	b := &beat{id: f.id, now: time.Now().UnixMicro(), expiry: int64(f.o.Expiry / time.Microsecond), max: f.o.MaxInstances, ttl: f.o.Expiry}
	var err error
	if r, ok := f.o.Store.(store.ScriptRunner); ok {
		// One script: a heartbeat that cannot lose a race. Compare-and-swap
		// beats of one key, hundreds at once (a rollout), lost to one
		// another and retried past their Timeout.
		var res store.ScriptResult
		res, err = r.RunScript(ctx, heartbeatScript, f.setKey, store.ScriptArgs{Limit: int64(f.o.MaxInstances), Window: b.expiry, Lease: f.id})
		b.count = int(res[0])
	} else {
		err = f.o.Store.Update(ctx, f.key, b)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.settled = time.Time{}
		return err
	}
	now := time.Now()
	if f.settled.IsZero() {
		f.settled = now.Add(f.o.Expiry)
	}
	n := int64(max(b.count, 1))
	if now.Before(f.settled) {
		// The others' heartbeats may have expired while this instance
		// could not reach the store, or before it started: until each has
		// had Expiry to beat again, a count that falls is not the fleet's.
		n = max(n, f.size.Load())
	}
	f.size.Store(n)
	return nil
}

// heartbeatScript is a heartbeat on a store that runs scripts (Redis,
// Valkey): one round trip, atomic, so that beats never lose to one another
// and retry. The key is a sorted set of instance ids (ARGV[3], a decimal
// uint64, never turned into a Lua number) scored by their last heartbeat,
// in µs on the server's clock, which every instance then shares. It adds
// this instance's, drops those older than the expiry (ARGV[2] µs: a score
// of now − expiry or less, as the Go path drops them) and any too far
// ahead to have been written so, keeps the most recent ARGV[1] (the
// MaxInstances), lives for the expiry, and replies the count. A key of
// another type is replaced. (The Go path's item is another key: instances
// of an earlier release, which beat there, and these do not count one
// another while both run.)
var heartbeatScript = store.NewScript("sluice-fleet-heartbeat", `local key = KEYS[1]
local max, expiry = ARGV[1] + 0, ARGV[2] + 0
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local kind = redis.call('TYPE', key).ok
if kind ~= 'zset' and kind ~= 'none' then
	redis.call('DEL', key)
end
redis.call('ZADD', key, now, ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - expiry))
redis.call('ZREMRANGEBYSCORE', key, string.format('(%d', now + expiry), '+inf')
local n = redis.call('ZCARD', key)
if n > max then
	redis.call('ZREMRANGEBYRANK', key, 0, n - max - 1)
	n = max
end
redis.call('PEXPIRE', key, string.format('%d', math.floor((expiry + 999) / 1000)))
return {n, 0, 0, 0, 0, 0}`, store.ArgLimit, store.ArgWindow, store.ArgLease)

// beat is one heartbeat's update of the heartbeat key. The state is a list
// of 16-byte entries, (instance id, last heartbeat in µs), most recent
// writer first.
type beat struct {
	id          uint64
	now, expiry int64
	max         int
	ttl         time.Duration
	count       int
}

func (b *beat) Apply(state []byte) ([]byte, time.Duration) {
	next := make([]byte, 16, min(len(state)+16, 16*b.max))
	binary.BigEndian.PutUint64(next, b.id)
	binary.BigEndian.PutUint64(next[8:], uint64(b.now))
	b.count = 1
	for i := 0; i+16 <= len(state) && b.count < b.max; i += 16 {
		id, seen := binary.BigEndian.Uint64(state[i:]), int64(binary.BigEndian.Uint64(state[i+8:]))
		if id == b.id || b.now-seen >= b.expiry || seen > b.now+b.expiry {
			continue
		}
		next = append(next, state[i:i+16]...)
		b.count++
	}
	return next, b.ttl
}

// FleetFallback returns a limiter for Config.Fallback that enforces cfg's
// policy divided by the fleet's size: each instance admits Limit/N (and
// Burst/N), rounded up, per Window on its own, with cfg.Store holding the
// local state (a memory store; the caller closes it). N is read at every
// decision, so a fleet that grows or shrinks while the store is healthy
// changes the share at once; during an outage the last count holds.
//
// The bound during an outage: each instance admits at most ⌈Limit/N⌉ per
// Window for an identity (a bucket algorithm, GCRA or the token bucket,
// starts full: its ⌈Burst/N⌉ at once, then ⌈Limit/N⌉ a Window, as the
// policy itself admits), so the fleet admits at most N_actual × ⌈Limit/N⌉
// ≈ Limit × N_actual/N: the limit itself while the count is right, more by
// the instances that joined unheard (a new instance whose heartbeat never
// reached the store counts itself alone). An identity whose traffic is
// skewed gets less than its limit: one that reaches k of N instances is
// admitted at most k/N of it (all its traffic on one instance: Limit/N).
// The bound is the fallback's alone: a window in which the outage starts
// or ends admits what the store admitted in it as well, up to about twice
// the limit, since neither side sees the other's count.
//
// The limiter's Quota is cfg's, the global one, as no call can know the
// fleet's size ahead of its decision. A call for more units than the
// current share's quota is refused, not an error, with Decision.Limit that
// quota and a RetryAfter of one Window (a smaller fleet may admit it).
//
// Rate algorithms only: a concurrency fallback would need leases counted
// across the fleet. cfg.Observer is left out: the limiter it stands in for
// reports its decisions, Degraded, so that a Config shared by both counts
// each once.
func FleetFallback(cfg core.Config, fleet *Fleet) (*core.Limiter, error) {
	if fleet == nil || fleet.id == 0 {
		return nil, errors.New("sluice: FleetFallback needs a Fleet made by NewFleet")
	}
	if store.IsNil(cfg.Algorithm) {
		return nil, errors.New("sluice: Config.Algorithm is nil")
	}
	if _, ok := cfg.Algorithm.(core.Leaser); ok {
		return nil, fmt.Errorf("%w: FleetFallback is for rate algorithms, not %s", core.ErrUnsupported, cfg.Algorithm.Name())
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	return scaledLimiter(cfg, fleet, 1)
}

// scaledLimiter returns a limiter over cfg whose policy is k/N of cfg's,
// N the fleet's size at each decision. It has no Observer: it decides for
// another limiter, which reports its decisions (Degraded, PreFiltered), so
// that a Config shared by both, Observer and all, counts each decision
// once.
func scaledLimiter(cfg core.Config, fleet *Fleet, k int64) (*core.Limiter, error) {
	cfg.Observer = nil
	s := &scaled{alg: cfg.Algorithm, fleet: fleet, k: k}
	if c, ok := cfg.Algorithm.(core.Clamper); ok {
		cfg.Algorithm = &scaledClamper{scaled: s, c: c}
	} else {
		cfg.Algorithm = s
	}
	return core.New(cfg)
}

// DefaultHeadroom is PreFilter's headroom when it is zero.
const DefaultHeadroom = 2

// maxHeadroom keeps headroom × Limit within int64.
const maxHeadroom = 1 << 20

// PreFilter returns a limiter for Config.PreFilter: a loose in-process
// limit in front of the store, cfg's policy (the global one) scaled to
// headroom × Limit / N per instance (and Burst alike), N the fleet's size,
// with cfg.Store holding the local state (a memory store; the caller closes
// it). A request it refuses costs no round trip; one it admits goes on to
// the store, which stays the source of truth. A headroom of zero means
// DefaultHeadroom (2).
//
// Sizing. The pre-filter counts every request this instance sends to the
// store, admitted there or not, less the units refunded since
// (core.Receipt: a door's refund, when a later layer refused the request,
// gives them back here too). It refuses what the global limit would
// admit only when one identity's traffic on this instance exceeds
// headroom/N of the limit in a window, so:
//
//   - headroom ≥ N (the pre-filter holds at least the whole global policy)
//     never refuses an identity that sends this instance no more than its
//     limit: the global limit would refuse the excess anyway. Headroom 2N
//     also leaves room for the units spent on requests the store refused
//     (a bucket earns them back only at the policy's rate).
//   - headroom < N (the default 2, for a fleet of more than 2) catches a
//     flood sooner and is right for traffic spread evenly (an identity's
//     share of one instance is about 1/N; 2/N leaves it double); it can
//     refuse what the global limit would admit for an identity whose
//     traffic is skewed onto few instances: on one instance it is held to
//     headroom/N of its limit.
//
// As with FleetFallback, the limiter's Quota is cfg's, and a call for more
// units than the current share's quota is refused with Decision.Limit that
// quota, which Config.PreFilter reads as the store's to decide; and
// cfg.Observer is left out (the limiter it filters for reports its
// refusals, PreFiltered).
//
// Rate algorithms only.
func PreFilter(cfg core.Config, fleet *Fleet, headroom int) (*core.Limiter, error) {
	if fleet == nil || fleet.id == 0 {
		return nil, errors.New("sluice: PreFilter needs a Fleet made by NewFleet")
	}
	if headroom < 0 || headroom > maxHeadroom {
		return nil, fmt.Errorf("sluice: PreFilter headroom must be 0 to %d, got %d", maxHeadroom, headroom)
	}
	if headroom == 0 {
		headroom = DefaultHeadroom
	}
	if store.IsNil(cfg.Algorithm) {
		return nil, errors.New("sluice: Config.Algorithm is nil")
	}
	if _, ok := cfg.Algorithm.(core.Leaser); ok {
		return nil, fmt.Errorf("%w: PreFilter is for rate algorithms, not %s", core.ErrUnsupported, cfg.Algorithm.Name())
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	return scaledLimiter(cfg, fleet, int64(headroom))
}

// scaled steps alg with the policy's share for the fleet's current size.
type scaled struct {
	alg   core.Algorithm
	fleet *Fleet
	k     int64 // the share is k/N of the policy
	share atomic.Pointer[share]
}

type share struct {
	n int
	p core.Policy
}

func (s *scaled) Name() string               { return s.alg.Name() }
func (s *scaled) Quota(p *core.Policy) int64 { return s.alg.Quota(p) }

// CheckPolicy checks the policy as alg would.
func (s *scaled) CheckPolicy(p *core.Policy) error {
	if c, ok := s.alg.(core.PolicyChecker); ok {
		return c.CheckPolicy(p)
	}
	return nil
}

func (s *scaled) Step(state []byte, now, n int64, p *core.Policy) ([]byte, time.Duration, core.Decision) {
	q := s.policy(p)
	if quota := s.alg.Quota(q); n > quota {
		// More than the share can ever admit: refused, and alg is never
		// stepped with a cost above its quota.
		return nil, 0, core.Decision{Limit: quota, RetryAfter: q.Window}
	}
	return s.alg.Step(state, now, n, q)
}

// Mark and Refund give back units of alg's share (core.Refunder) when alg
// can refund, and nothing otherwise: a pre-filter's Receipt, refunded with
// the store's charge (core.Limiter.Charge), so that it does not go on
// refusing what the store got back.
func (s *scaled) Mark(d core.Decision, at int64, p *core.Policy) int64 {
	if r, ok := s.alg.(core.Refunder); ok {
		return r.Mark(d, at, s.policy(p))
	}
	return 0
}

func (s *scaled) Refund(state []byte, now, at, mark, n int64, p *core.Policy) ([]byte, time.Duration, int64) {
	if r, ok := s.alg.(core.Refunder); ok {
		return r.Refund(state, now, at, mark, n, s.policy(p))
	}
	return nil, 0, 0
}

// policy returns p's share of a fleet of the current size, built once per
// size.
func (s *scaled) policy(p *core.Policy) *core.Policy {
	size := s.fleet.Size()
	if sh := s.share.Load(); sh != nil && sh.n == size && sh.p.Name == p.Name {
		return &sh.p
	}
	q := *p
	q.Limit = min(ceilDiv(q.Limit*s.k, int64(size)), core.MaxLimit, q.WindowMicros())
	if q.Burst > 0 {
		q.Burst = min(ceilDiv(q.Burst*s.k, int64(size)), core.MaxLimit)
	}
	sh := &share{n: size, p: q}
	s.share.Store(sh)
	return &sh.p
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

type scaledClamper struct {
	*scaled
	c core.Clamper
}

func (s *scaledClamper) Clamp(state []byte, now, skew int64, p *core.Policy) ([]byte, time.Duration, bool) {
	return s.c.Clamp(state, now, skew, s.policy(p))
}

// nopAlgorithm and nopStore only let NewFleet check a key name as New does.
type nopAlgorithm struct{}

func (nopAlgorithm) Name() string               { return "nop" }
func (nopAlgorithm) Quota(p *core.Policy) int64 { return p.Limit }
func (nopAlgorithm) Step([]byte, int64, int64, *core.Policy) ([]byte, time.Duration, core.Decision) {
	return nil, 0, core.Decision{}
}

type nopStore struct{}

func (nopStore) Update(context.Context, store.Key, store.Mutation) error { return nil }
