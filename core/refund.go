package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/store"
)

// Refunder is implemented by algorithms that can give back units a
// decision charged (package algorithm: all but the concurrency limit). Refund gives back up to n units charged at at (µs:
// the time the charging decision was made, on the clock that made it) to
// state at now, and reports how many it gave back. It must never
// over-admit: never restore more than the state holds of the charge,
// never into another window than the one charged, never above capacity,
// so that the state after a refund admits no more than it would had the
// refunded charge never happened. A nil next means nothing to write
// (nothing refunded).
//
// Mark returns what Refund needs to know of the charging decision d made
// at at beyond its time (a bucket's level right after it); the Limiter
// keeps it in the Receipt and passes it to Refund as mark.
type Refunder interface {
	Mark(d Decision, at int64, p *Policy) int64
	Refund(state []byte, now, at, mark, n int64, p *Policy) (next []byte, ttl time.Duration, refunded int64)
}

// Remarker is implemented by a Refunder whose mark must follow the units a
// receipt gave back (the leaky bucket's, whose refund compares its queue's
// drain time with the charge's place, Mark, to tell whether a later charge
// queued behind it). Remark returns the mark of what is left of a charge
// after k more of its units were refunded; a Receipt refunded in parts
// passes it to the next Refund.
type Remarker interface {
	Remark(mark, k int64, p *Policy) int64
}

// RefundScripted is implemented by algorithms whose Refund has a Lua twin
// in a refund script over several keys (package algorithm's RefundScript):
// its ARGV are now (0 reads the server's TIME), the number of limits k, at,
// then for each limit its AppendMultiArgs values for hint at followed by
// its mark; its reply is the units refunded to each limit.
type RefundScripted interface {
	MultiScripted
	MultiRefundScript() *store.Script
}

// ErrNotRefunded is returned by Receipt.Refund when nothing can be given
// back: the receipt is spent, or no limit's algorithm can refund on the
// store's path.
var ErrNotRefunded = errors.New("sluice: nothing to refund")

// Receipt is what an admitted charge (Limiter.Charge, Multi.Charge) leaves
// for a refund: give back some or all of its units when a later check
// refuses the request they were charged for (a layer of another identity,
// the application itself). It is safe for concurrent use, and never
// refunds more units than were charged, however often Refund is called.
//
// What a refund keeps. A window's refund (fixed window, sliding counter,
// sliding log, calendar) gives the units back whole. The leaky bucket's
// gives the charge's place in its queue back whole, but nothing once a
// later charge queued behind it: a shaped queue keeps the starts it gave
// one interval apart. The other buckets' (GCRA, token bucket) give back
// the charge's time less the time since the charge, δ (about a round trip
// on a network store): it cannot tell whether another caller's charge
// stacked on the refunded one meanwhile, and giving back more could then
// admit more than had the charge never happened. So each refund leaves δ
// of debt on the key, which
// the refill pays back at one second a second: a key refunded r times a
// second keeps r·δ seconds of debt a second, paid as it accrues while that
// is below one (on Redis at δ ≈ 1 ms, about a thousand refunds a second on
// one key); above it the bucket drains, though far more slowly than
// without refunds, which keep a whole interval per refused request. Where
// one identity's refused requests flood an earlier limit (a per-IP layer
// before a per-user one, a Pool's Share), give that limit a window
// algorithm.
type Receipt struct {
	l        *Limiter // a Limiter's charge, or
	m        *Multi   // a Multi's
	limits   *Limits
	identity string
	at       int64
	markMu   sync.Mutex // guards mark and marks, which Remarker moves
	mark     int64      // a Limiter's charge: its algorithm's Mark
	marks    []int64    // a Multi's: each limit's Mark
	n        int64
	resets   uint64   // its Limiter's or Multi's Resets when it charged
	pre      *Receipt // the pre-filter's charge (Config.PreFilter), refunded with it
	left     atomic.Int64
}

// N is the units the receipt's charge took.
func (r *Receipt) N() int64 { return r.n }

// Left is the units that may still be refunded.
func (r *Receipt) Left() int64 { return r.left.Load() }

// take reserves up to n units of the receipt for a refund.
func (r *Receipt) take(n int64) int64 {
	for {
		left := r.left.Load()
		k := min(n, left)
		if k <= 0 || r.left.CompareAndSwap(left, left-k) {
			return max(k, 0)
		}
	}
}

// Refund gives back up to n of the receipt's units, and reports how many
// every limit took back (the fewest, when a charge spanned several
// limits: each limit gives back only what its state still holds of the
// charge, and nothing once its window has ended). Units once handed to a
// refund are spent, whatever the store answers, so a receipt never
// restores more than it charged. Errors: ErrInvalidInput for n < 1 (the
// receipt keeps its units); ErrNotRefunded when nothing is left or no
// limit can refund on the store's path; the store's error (ErrUnavailable)
// when it could not decide. A refund the store took but that found nothing
// to give back (the charge's window has ended) returns 0 and no error:
// check the count, not only the error.
func (r *Receipt) Refund(ctx context.Context, n int64) (int64, error) {
	if r == nil {
		return 0, ErrNotRefunded
	}
	if n < 1 {
		return 0, costBelowOne(n)
	}
	// Counted from the check to the store's answer: a Reset waits for a
	// refund on its way, which then lands before the delete, never in the
	// state after it.
	g := r.gate()
	if g == nil || !g.enter(r.resets) {
		return 0, ErrNotRefunded
	}
	defer g.leave()
	k := r.take(n)
	if k == 0 {
		return 0, ErrNotRefunded
	}
	if r.l != nil {
		return r.l.refund(ctx, r, k)
	}
	return r.m.refund(ctx, r, k)
}

// resetGate orders a Limiter's (or Multi's) Resets and refunds. A refund
// enters it with the Resets count its receipt was charged at, and is
// counted until the store answered. A Reset first bars every receipt of
// the count so far from entering, then waits for the refunds that entered
// before (so that they land before its delete), and counts itself only
// once its delete was answered, and every other Reset under way too: a
// charge made before then, whose units the delete may have taken, has a
// receipt of a barred count, void. No refund enters while a Reset is under
// way, so it waits for the refunds on their way when it began alone:
// later ones, of receipts charged after it, never keep it waiting.
type resetGate struct {
	n        atomic.Uint64 // Resets so far: read without mu; n ≤ barred, below it while a Reset is under way
	mu       sync.Mutex
	barred   uint64 // only a receipt of this count may enter
	active   int    // Resets between begin and end
	inflight int    // refunds on their way
}

// count is the number of Resets so far.
func (g *resetGate) count() uint64 { return g.n.Load() }

func (g *resetGate) enter(resets uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if resets != g.barred {
		return false
	}
	g.inflight++
	return true
}

func (g *resetGate) leave() {
	g.mu.Lock()
	g.inflight--
	g.mu.Unlock()
}

// begin bars the receipts charged so far, and those charged until end, and
// waits within ctx for the refunds of barred receipts on their way; past
// ctx it returns ctx's error (the receipts stay void). end must follow,
// once the delete was answered or not sent.
func (g *resetGate) begin(ctx context.Context) error {
	g.mu.Lock()
	g.barred++ // past every count so far
	g.active++
	g.mu.Unlock()
	for {
		g.mu.Lock()
		busy := g.inflight > 0
		g.mu.Unlock()
		if !busy {
			return nil
		}
		t := time.NewTimer(time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sluice: Reset waited for a refund on its way until its deadline: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// end counts the Reset begun, once no other is under way: a charge made
// before then may have lost its units to one of their deletes.
func (g *resetGate) end() {
	g.mu.Lock()
	if g.active--; g.active == 0 {
		g.n.Store(g.barred)
	}
	g.mu.Unlock()
}

// gate is the receipt's Limiter's or Multi's resetGate (nil for a zero
// Receipt).
func (r *Receipt) gate() *resetGate {
	switch {
	case r.l != nil:
		return &r.l.resets
	case r.m != nil:
		return &r.m.resets
	}
	return nil
}

// Charge is AllowN for a request that a later check may still refuse:
// an admission also returns a Receipt, whose Refund gives the units back.
// A refusal, a degraded decision (the failure policy's) and a shadow
// admission charge the store nothing and return no Receipt (a fallback's
// degraded admission is charged on the fallback, and kept). When the algorithm
// cannot refund (Refunder), or on a script store whose multi-limit
// script cannot run it (RefundScripted, store.MultiScriptRunner), Charge
// is AllowN and returns no Receipt. The deny cache and the pre-filter
// stand in front of the store as they do for AllowN, and their refusals
// return no Receipt either; a refund gives the units back to the
// pre-filter too.
func (l *Limiter) Charge(ctx context.Context, identity string, n int64) (Decision, *Receipt, error) {
	_, refunds := l.alg.(Refunder)
	ms, scripted := l.alg.(RefundScripted)
	mr, multi := l.cfg.Store.(store.MultiScriptRunner)
	if !refunds || l.leaser != nil || (l.runner != nil && !(scripted && multi)) {
		d, err := l.AllowN(ctx, identity, n)
		return d, nil, err
	}
	if err := l.check(identity, n); err != nil {
		return Decision{}, nil, err
	}
	resets := l.resets.count() // before the charge: a Reset during it voids the receipt
	start := l.timer()
	var sc screened
	if l.deny != nil || l.cfg.PreFilter != nil {
		var d Decision
		var err error
		if sc, d, err = l.screen(ctx, identity, n, start, true); sc.done {
			return d, nil, err
		}
	}
	key := store.Key{Namespace: l.ns, Identity: identity}
	var d Decision
	var at int64
	var err error
	if l.runner != nil {
		d, at, err = l.chargeScript(ctx, key, n, ms, mr)
	} else {
		d, at, err = l.chargeUpdate(ctx, key, n)
	}
	l.hold(identity, n, sc, d, err)
	charged := err == nil && d.Allowed
	d, err = l.settle(ctx, identity, n, d, err, start)
	if !charged || err != nil {
		return d, nil, err
	}
	r := &Receipt{l: l, identity: identity, at: at, n: n, mark: l.alg.(Refunder).Mark(d, at, &l.p), resets: resets, pre: sc.pre}
	r.left.Store(n)
	return d, r, nil
}

// chargeScript decides on the server with the multi-limit script over the
// Limiter's one key (its twin writes the state the Limiter's own script
// writes), which also reports the server's time.
func (l *Limiter) chargeScript(ctx context.Context, key store.Key, n int64, ms MultiScripted, mr store.MultiScriptRunner) (Decision, int64, error) {
	ctx, cancel := l.deadline(ctx)
	defer cancel()
	hint := l.now()
	var now int64
	if l.cfg.Clock != nil {
		now = scriptNow(hint)
	}
	var argBuf [13]int64
	var replyBuf [7]int64
	args := ms.AppendMultiArgs(append(argBuf[:0], now, 1), &l.p, hint, n)
	keys := [1]store.Key{key}
	reply, err := mr.RunMultiScript(ctx, ms.MultiScript(), keys[:], args, replyBuf[:0])
	if err != nil {
		return Decision{}, 0, err
	}
	if len(reply) != 7 {
		return Decision{}, 0, &store.Error{Op: "script", Err: store.UnknownOutcome(fmt.Errorf("sluice: a multi-limit script replied %d integers for 1 limit", len(reply)))}
	}
	return ScriptDecision(store.ScriptResult(reply[:6])), reply[6], nil
}

// chargeUpdate is do's generic path, keeping the time the decision was
// made at (the last attempt's, on a compare-and-swap store).
func (l *Limiter) chargeUpdate(ctx context.Context, key store.Key, n int64) (Decision, int64, error) {
	ctx, cancel := l.deadline(ctx)
	defer cancel()
	m := mutationPool.Get().(*mutation)
	m.l, m.alg, m.leaser, m.p, m.n, m.lease, m.op = l, l.step, nil, &l.p, n, 0, store.OpTake
	m.d = Decision{}
	m.now = l.now()
	err := l.cfg.Store.Update(ctx, key, m)
	d, at := m.d, m.now
	m.l, m.alg, m.leaser, m.p = nil, nil, nil, nil
	mutationPool.Put(m)
	return d, at, err
}

func (l *Limiter) refund(ctx context.Context, r *Receipt, n int64) (int64, error) {
	if r.pre != nil {
		// In process, and loose: its own answer changes nothing here.
		_, _ = r.pre.Refund(ctx, n)
	}
	if l.deny != nil {
		// Once the store has answered, whatever it answered: a refusal
		// held for the identity may be one the refund lifts.
		defer l.deny.freed(r.identity)
	}
	ctx, cancel := l.deadline(ctx)
	defer cancel()
	key := store.Key{Namespace: l.ns, Identity: r.identity}
	r.markMu.Lock()
	mark := r.mark
	r.markMu.Unlock()
	k, err := l.refundAt(ctx, key, r, mark, n)
	if rm, ok := l.alg.(Remarker); ok && err == nil && k > 0 {
		r.markMu.Lock()
		r.mark = rm.Remark(r.mark, k, &l.p)
		r.markMu.Unlock()
	}
	return k, err
}

// refundAt refunds n of r's units at key, mark being what is left of the
// charge's.
func (l *Limiter) refundAt(ctx context.Context, key store.Key, r *Receipt, mark, n int64) (int64, error) {
	if l.runner != nil {
		ms, _ := l.alg.(RefundScripted)
		mr, _ := l.cfg.Store.(store.MultiScriptRunner)
		var now int64
		if l.cfg.Clock != nil {
			now = scriptNow(l.now())
		}
		var argBuf [15]int64
		args := append(ms.AppendMultiArgs(append(argBuf[:0], now, 1, r.at), &l.p, r.at, n), mark)
		keys := [1]store.Key{key}
		var replyBuf [1]int64
		reply, err := mr.RunMultiScript(ctx, ms.MultiRefundScript(), keys[:], args, replyBuf[:0])
		if err != nil || len(reply) != 1 {
			return 0, refundError(err, len(reply), 1)
		}
		return reply[0], nil
	}
	rm := &refundMutation{now: l.now(), at: r.at, n: n, clock: l.now}
	rm.one = &refundLimit{alg: l.alg.(Refunder), p: &l.p, mark: mark}
	if err := l.cfg.Store.Update(ctx, key, rm); err != nil {
		return 0, err
	}
	return rm.one.refunded, nil
}

func refundError(err error, got, want int) error {
	if err != nil {
		return err
	}
	return &store.Error{Op: "script", Err: store.UnknownOutcome(fmt.Errorf("sluice: a refund script replied %d integers for %d limits", got, want))}
}

type refundLimit struct {
	alg      Refunder
	p        *Policy
	mark     int64
	refunded int64
}

// refundMutation gives units back to one state (a Limiter's key) or to
// the segments of a Multi's item.
type refundMutation struct {
	now, at, n int64
	clock      func() int64
	one        *refundLimit // a Limiter's key
	ls         *Limits      // or a Multi's item
	marks      []int64      // per limit of ls
	refunded   []int64      // per limit of ls
}

func (rm *refundMutation) Now() int64 { return rm.now }

func (rm *refundMutation) Retime() { rm.now = rm.clock() }

func (rm *refundMutation) Apply(state []byte) ([]byte, time.Duration) {
	if rm.one != nil {
		next, ttl, k := rm.one.alg.Refund(state, rm.now, rm.at, rm.one.mark, rm.n, rm.one.p)
		rm.one.refunded = k
		return next, ttl
	}
	segs := decodeSegments(state, nil)
	out := make([]byte, 0, len(state))
	changed := false
	var ttl time.Duration
	for i := range rm.ls.ls {
		l := &rm.ls.ls[i]
		seg := findSegment(segs, l.p.Name)
		rm.refunded[i] = 0
		if rf, ok := l.alg.(Refunder); ok {
			next, t, k := rf.Refund(append([]byte(nil), seg...), rm.now, rm.at, rm.marks[i], rm.n, &l.p)
			if next != nil {
				seg, changed = next, true
				rm.refunded[i] = k
			}
			ttl = max(ttl, t)
		}
		out = appendSegment(out, l.p.Name, seg)
	}
	if !changed {
		return nil, 0
	}
	out = appendOthers(out, segs, rm.ls)
	// A segment left as it was keeps its state; the item must outlive the
	// longest of them, which only the algorithm knows: keep the item at
	// least as long as any state of the set can live (a longer TTL never
	// admits more).
	for i := range rm.ls.ls {
		p := &rm.ls.ls[i].p
		ttl = max(ttl, 2*p.Window+24*time.Hour, Micros(p.Capacity()*p.IntervalMicros()+p.MaxDelayMicros()))
	}
	return out, ttl
}

// Charge is AllowN that also returns, for an admission, a Receipt whose
// Refund gives the units back to every limit (see Limiter.Charge). A
// refusal or a degraded decision charges nothing and returns no Receipt.
func (m *Multi) Charge(ctx context.Context, identity string, limits *Limits, n int64, states []LimitState) (Decision, []LimitState, *Receipt, error) {
	resets := m.resets.count()
	d, states, at, err := m.allow(ctx, identity, limits, n, states)
	if err != nil || !d.Allowed || d.Degraded {
		return d, states, nil, err
	}
	r := &Receipt{m: m, limits: limits, identity: identity, at: at, n: n, marks: make([]int64, len(limits.ls)), resets: resets}
	for i := range limits.ls {
		if rf, ok := limits.ls[i].alg.(Refunder); ok {
			r.marks[i] = rf.Mark(states[i].Decision, at, &limits.ls[i].p)
		}
	}
	r.left.Store(n)
	return d, states, r, nil
}

func (m *Multi) refund(ctx context.Context, r *Receipt, n int64) (int64, error) {
	ctx, cancel := m.deadline(ctx)
	defer cancel()
	ls := r.limits
	refunded := make([]int64, len(ls.ls))
	r.markMu.Lock()
	marks := slices.Clone(r.marks)
	r.markMu.Unlock()
	defer func() {
		r.markMu.Lock()
		defer r.markMu.Unlock()
		for i := range ls.ls {
			if rm, ok := ls.ls[i].alg.(Remarker); ok && refunded[i] > 0 {
				r.marks[i] = rm.Remark(r.marks[i], refunded[i], &ls.ls[i].p)
			}
		}
	}()
	if m.runner != nil && ls.script != nil {
		var rs *store.Script
		for i := range ls.ls {
			if s, ok := ls.ls[i].alg.(RefundScripted); ok {
				rs = s.MultiRefundScript()
				break
			}
		}
		if rs == nil {
			return 0, ErrNotRefunded
		}
		ns := m.namespaces(ls)
		keys := make([]store.Key, len(ls.ls))
		var now int64
		if m.cfg.Clock != nil {
			now = scriptNow(m.now())
		}
		args := []int64{now, int64(len(ls.ls)), r.at}
		for i := range ls.ls {
			l := &ls.ls[i]
			keys[i] = store.Key{Namespace: ns[i], Identity: r.identity}
			args = append(l.ms.AppendMultiArgs(args, &l.p, r.at, n), marks[i])
		}
		reply, err := m.runner.RunMultiScript(ctx, rs, keys, args, nil)
		if err != nil || len(reply) != len(ls.ls) {
			return 0, refundError(err, len(reply), len(ls.ls))
		}
		copy(refunded, reply)
	} else {
		rm := &refundMutation{now: m.now(), at: r.at, n: n, clock: m.now, ls: ls, marks: marks, refunded: refunded}
		if err := m.cfg.Store.Update(ctx, store.Key{Namespace: m.ns, Identity: r.identity}, rm); err != nil {
			return 0, err
		}
	}
	least := n
	any := false
	for i := range ls.ls {
		if _, ok := ls.ls[i].alg.(Refunder); ok {
			least, any = min(least, refunded[i]), true
		}
	}
	if !any {
		return 0, ErrNotRefunded
	}
	return least, nil
}
