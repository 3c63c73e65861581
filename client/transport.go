// Package client is client-side rate limiting: an http.RoundTripper that
// honours the limits a server announces, so that a client of a limited API
// waits for its quota instead of spending requests on 429s.
//
//	hc := &http.Client{Transport: &client.Transport{}}
//	resp, err := hc.Get("https://api.example.com/v1/items") // waits when the quota is spent
//
// The Transport reads what the server says on every response: the IETF
// RateLimit and RateLimit-Policy fields
// (draft-ietf-httpapi-ratelimit-headers: `RateLimit: "per-key";r=7;t=12`,
// `RateLimit-Policy: "per-key";q=100;w=60`), and Retry-After on a 429 or
// 503. Before it sends a request, it waits until every policy the server
// reported for that request's scope (by default, its host) has a unit left:
// the r the server reported, less what has been sent since; after t, the
// quota is whole again (q, or Sluice's sluice-burst for a bucket). A limit
// on requests in flight (qu="concurrent-requests") gets a unit back with
// each response instead, once its body has been read to its end or closed
// (the server's handler may still be writing it), and none at its t: once
// its units are out, one request goes at a time as responses come back, so
// a body left open holds its unit. A Retry-After holds every
// request to that scope until it passes; but a 429 from a limit on
// requests in flight alone holds it for a second at most, as its
// Retry-After is when the server's last lease would expire (a Sluice
// server's LeaseTTL), a bound and not a wait: units come back as the
// server's handlers return. When nothing is known that allows
// more (a new scope, a policy past its reset with no RateLimit-Policy, a
// spent quota with no reset), it lets one request out at a time until a
// response says more, so a crowd of waiting requests never stampedes a
// reset. A server that sends no RateLimit fields is not held back after its
// first response.
//
// A request that would have to wait longer than MaxWait, or at all when
// FailFast is set, is not sent: RoundTrip returns a *LimitedError (matching
// ErrLimited) that says how long, or which spent limit waits for a response
// to come back. (Under FailFast, a request to a scope whose limits are not
// known yet goes: nothing known holds it.) Waiting honours the request's
// context.
//
// The Transport never retries a request that is not idempotent (RFC 9110:
// GET, HEAD, OPTIONS, TRACE, PUT, DELETE); an idempotent one is retried after
// a 429, or a 503 that carries Retry-After, only when Retries allows it and
// its body can be replayed; a Retry-After of 0, or of a date already past,
// asks for the retry at once. A 503 without Retry-After is returned at once:
// nobody knows when the server is back; so is a 429 without Retry-After
// from a server that sends RateLimit fields, which says that no wait would
// help (Sluice's doors answer a cost above the quota so). A 429 with
// neither holds the scope for a second.
//
// The server's t and Retry-After are whole seconds, rounded up by a Sluice
// server, so the Transport errs late, never early: against a limit it is
// told about, it sends no request that the limit refuses, except when other
// clients share the quota; when a body was closed before its end, or read
// to its end while the server's handler still ran (one that flushed its
// last byte and went on: its unit comes back at once, and the handler
// holds the server's for as long as it runs on); when the server
// charges a request more than one unit (a Sluice layer's Weight or Cost):
// r counts units, and the Transport takes one a request; and when it has
// forgotten a limit (see below).
//
// What the Transport remembers is bounded. Of the scopes, it keeps
// MaxScopes; past them it forgets the least recently used that holds
// nothing back (no Retry-After pending, no request or body out, no policy
// spent), or, when every one of the 64 least recently used does, the least
// recently used. A forgotten scope starts again as a new one: one request
// goes, and its response says what is left, or refuses it. Of a scope's
// policies, it keeps 16: a policy reported when 16 are known takes the
// place of the one reported least recently that holds nothing back (not
// one the same response reports), and is not read while all 16 hold
// requests back. So keep MaxScopes above the scopes whose limits are
// spent at once.
package client

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/dunglas/httpsfv"
)

// ErrLimited matches every *LimitedError.
var ErrLimited = errors.New("client: rate limited")

// LimitedError is a request the Transport did not send, because the
// server's limit would refuse it for longer than the Transport may wait.
type LimitedError struct {
	Scope  string // the request's scope (its host, by default)
	Policy string // the policy that has no unit left, or "" for a Retry-After
	// Wait is how long until the request could be sent; zero when that
	// waits for a response to a request in flight (a spent concurrency
	// limit, or a scope whose limits are not known yet: Policy "").
	Wait time.Duration
}

func (e *LimitedError) Error() string {
	what := "Retry-After"
	if e.Policy != "" {
		what = "policy " + strconv.Quote(e.Policy)
	}
	if e.Wait <= 0 {
		if e.Policy == "" {
			what = "limits not known yet"
		}
		return fmt.Sprintf("client: %s: %s: the next request waits for a response to one in flight", e.Scope, what)
	}
	return fmt.Sprintf("client: %s: %s allows the next request in %v", e.Scope, what, e.Wait.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrLimited) true.
func (e *LimitedError) Is(target error) bool { return target == ErrLimited }

// DefaultMaxWait is Transport.MaxWait when it is zero.
const DefaultMaxWait = time.Minute

// DefaultMaxScopes is Transport.MaxScopes when it is zero.
const DefaultMaxScopes = 1024

// maxPolicies bounds the policies remembered per scope: a server that
// sends more names than this (hostile, or broken) cannot grow the state.
const maxPolicies = 16

// maxName bounds the length of a policy name the Transport keeps, in bytes
// (Sluice's are at most 64): an item with a longer name is not read, so
// that a scope's state stays small however long the names a server sends.
const maxName = 256

// Transport is an http.RoundTripper that honours the limits servers
// announce (see the package doc). The zero value is ready to use; a
// Transport is safe for concurrent use and must not be copied after first
// use.
type Transport struct {
	// Base sends the requests. Nil means http.DefaultTransport.
	Base http.RoundTripper
	// FailFast returns a *LimitedError at once instead of waiting.
	FailFast bool
	// MaxWait is the longest a request waits for its quota, in all (it may
	// wake for a unit another request takes, and sleep again, and its
	// Retries wait within it too), and for the
	// response of a request already out when nothing is known yet; a
	// longer wait returns a *LimitedError, at once when it is known
	// beforehand. Zero means DefaultMaxWait; negative means never wait
	// (the same as FailFast).
	MaxWait time.Duration
	// Retries is how many times an idempotent request whose body can be
	// replayed is sent again after a 429 or a 503 with Retry-After, each
	// after the wait the response asked for, within what is left of the
	// request's MaxWait. Zero means never: the 429 or 503 is returned.
	Retries int
	// Scope names the quota a request draws on. Nil means its URL's host
	// (with port): every policy a server reports applies to every request
	// to that host. Give a finer scope (host and first path segment, say)
	// when a server limits routes apart.
	Scope func(*http.Request) string
	// MaxScopes bounds the scopes remembered: past it, the least recently
	// used of those that hold no request back is forgotten first (see the
	// package doc). Zero means DefaultMaxScopes.
	MaxScopes int

	// now is the clock, for tests; nil means time.Now.
	now func() time.Time

	mu     sync.Mutex
	scopes map[string]*list.Element // of *scope
	lru    list.List                // most recently used first
}

// scope is what is known of one scope's limits.
type scope struct {
	name     string
	blocked  time.Time          // no request before this (Retry-After)
	policies map[string]*policy // by name
	learned  bool               // a response has been read
	reports  int64              // responses read
	inflight int                // requests sent and not yet answered
	notify   chan struct{}      // closed (and replaced) when a response is read
}

// policy is one of a scope's limits, as the server last reported it.
type policy struct {
	known     bool      // remaining is the server's count, less what was sent since
	remaining int64     // units left until reset
	reset     time.Time // when the quota is whole again; zero once refilled
	quota     int64     // the whole quota (0: unknown)
	inflight  int64     // requests sent against it and not yet answered
	bodies    int64     // answered requests whose open body holds a unit (concurrency)
	// interval is, for a bucket (Sluice's sluice-burst), the time one unit
	// takes to come back (w/q); zero for a window, whose units come back
	// only at its reset. accrued is when remaining was last brought up to
	// date with the units that came back since.
	interval time.Duration
	accrued  time.Time
	// concurrent marks a limit on requests in flight
	// (qu="concurrent-requests"): a unit comes back with its response, and
	// the item's t is no reset.
	concurrent bool
	report     int64 // the scope's response that last reported it (scope.reports)
}

// holds reports whether p holds back a request at now, or is counting one:
// a request or an open body of it is out, or its count is spent and no
// unit has come back yet.
func (p *policy) holds(now time.Time) bool {
	switch {
	case p.inflight > 0 || p.bodies > 0:
		return true
	case !p.known || p.remaining > 0:
		return false
	case !p.reset.IsZero() && !p.reset.After(now):
		return false // whole again
	case p.interval > 0 && p.next(now) <= 0:
		return false // a unit is back
	}
	return true
}

// holds reports whether s holds back a request at now, or is counting
// one: a Retry-After, a request or body out, a spent policy.
func (s *scope) holds(now time.Time) bool {
	if s.inflight > 0 || s.blocked.After(now) {
		return true
	}
	for _, p := range s.policies {
		if p.holds(now) {
			return true
		}
	}
	return false
}

// forgetPolicy makes room for a policy s has not seen: it forgets, of the
// policies that hold nothing back (policy.holds) and that an earlier
// response reported, the one reported least recently, and reports whether
// there was one.
func (s *scope) forgetPolicy(now time.Time) bool {
	var oldest string
	var at *policy
	for name, p := range s.policies {
		if p.report < s.reports && !p.holds(now) && (at == nil || p.report < at.report) {
			oldest, at = name, p
		}
	}
	if at == nil {
		return false
	}
	delete(s.policies, oldest)
	return true
}

// refill adds to remaining the units a bucket got back by now: one per
// interval since accrued, up to its quota; the part of an interval not yet
// complete is kept for the next call.
func (p *policy) refill(now time.Time) {
	if p.interval <= 0 || !p.known || p.accrued.IsZero() || !now.After(p.accrued) {
		return
	}
	back := int64(now.Sub(p.accrued) / p.interval)
	if p.remaining+back >= p.quota-p.inflight {
		p.remaining, p.accrued = max(p.remaining, p.quota-p.inflight), now
		return
	}
	p.remaining += back
	p.accrued = p.accrued.Add(time.Duration(back) * p.interval)
}

// next is how long until a spent bucket has a unit back (0 for a window).
func (p *policy) next(now time.Time) time.Duration {
	if p.interval <= 0 || p.accrued.IsZero() {
		return 0
	}
	return p.accrued.Add(p.interval).Sub(now)
}

func (t *Transport) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

func (t *Transport) maxWait() time.Duration {
	switch {
	case t.FailFast || t.MaxWait < 0:
		return 0
	case t.MaxWait == 0:
		return DefaultMaxWait
	}
	return t.MaxWait
}

func (t *Transport) scopeOf(r *http.Request) string {
	if t.Scope != nil {
		return t.Scope(r)
	}
	return r.URL.Host
}

// maxScan bounds how many of the least recently used scopes get looks at
// for one that holds nothing back, when it must forget one.
const maxScan = 64

// get returns the scope named name, creating it. Past MaxScopes it forgets
// one: the least recently used that holds nothing back (scope.holds), of
// the maxScan least recently used, or else the least recently used. t.mu
// is held.
func (t *Transport) get(name string) *scope {
	if t.scopes == nil {
		t.scopes = map[string]*list.Element{}
	}
	if e, ok := t.scopes[name]; ok {
		t.lru.MoveToFront(e)
		return e.Value.(*scope)
	}
	s := &scope{name: name, policies: map[string]*policy{}}
	t.scopes[name] = t.lru.PushFront(s)
	limit := t.MaxScopes
	if limit <= 0 {
		limit = DefaultMaxScopes
	}
	for t.lru.Len() > limit {
		old := t.lru.Back()
		now := t.clock()
		for e, n := old, 0; e != nil && n < maxScan; e, n = e.Prev(), n+1 {
			if sc := e.Value.(*scope); sc != s && !sc.holds(now) {
				old = e
				break
			}
		}
		t.lru.Remove(old)
		delete(t.scopes, old.Value.(*scope).name)
	}
	return s
}

// RoundTrip sends r once its scope's limits allow it (see the package doc).
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL == nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errors.New("sluice/client: nil Request.URL")
	}
	name := t.scopeOf(r)
	// MaxWait bounds the whole wait, however many times the request sleeps
	// (it may lose a unit it woke for to another request, and sleep again)
	// and however many times it is sent again.
	maxWait := t.maxWait()
	deadline := t.clock().Add(maxWait)
	for attempt := 0; ; attempt++ {
		s, sent, err := t.admit(r.Context(), name, maxWait, deadline)
		if err != nil {
			if r.Body != nil {
				r.Body.Close() // a RoundTripper closes the body, even on error
			}
			return nil, err
		}
		resp, err := t.base().RoundTrip(r)
		retry, again := t.learn(s, sent, resp, err)
		if err != nil || !again || attempt >= t.Retries || !replayable(r) {
			return resp, err
		}
		if t.clock().Add(retry).After(deadline) {
			return resp, nil // the caller decides; the Transport will not wait that long
		}
		// Drain and close the 429 before sending again.
		resp.Body.Close()
		if r.GetBody != nil {
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			r = r.Clone(r.Context())
			r.Body = body
		}
	}
}

// replayable reports whether r may be sent again by the Transport itself:
// an idempotent method (RFC 9110 §9.2.2) and a body that can be replayed.
func replayable(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	return r.Body == nil || r.Body == http.NoBody || r.GetBody != nil
}

// admit waits until a request may go to scope name, at the latest until
// deadline (the request's MaxWait, maxWait, from its start), and counts it
// as sent against the scope and every policy it draws on (returned, for
// learn).
func (t *Transport) admit(ctx context.Context, name string, maxWait time.Duration, deadline time.Time) (*scope, []*policy, error) {
	for {
		t.mu.Lock()
		s := t.get(name)
		now := t.clock()
		left := deadline.Sub(now)
		wait, by, blind := s.state(now)
		if wait <= 0 && blind && s.inflight > 0 && (maxWait > 0 || by != "") {
			// Nothing is known that allows more: wait for the response of
			// the request already out, rather than stampede, within what
			// is left of MaxWait. Under FailFast, a request to a scope
			// whose limits are not known yet goes (it waits for nothing),
			// and one that a known spent limit holds (by) does not.
			if s.notify == nil {
				s.notify = make(chan struct{})
			}
			done := s.notify
			t.mu.Unlock()
			if left <= 0 {
				return nil, nil, &LimitedError{Scope: name, Policy: by}
			}
			if err := sleepUntil(ctx, done, left); err != nil {
				return nil, nil, err
			}
			continue
		}
		if wait <= 0 {
			sent := make([]*policy, 0, len(s.policies))
			for _, p := range s.policies {
				if p.known {
					p.remaining--
				}
				p.inflight++
				sent = append(sent, p)
			}
			s.inflight++
			t.mu.Unlock()
			return s, sent, nil
		}
		t.mu.Unlock()
		if wait > left {
			return nil, nil, &LimitedError{Scope: name, Policy: by, Wait: wait}
		}
		if err := sleepUntil(ctx, nil, wait); err != nil {
			return nil, nil, err
		}
	}
}

// state is, for a request to s at now: how long it must wait and the
// policy that holds it ("" for Retry-After); or, when no wait is known,
// whether it would go out blind (nothing learned yet, a policy whose count
// is unknown, or one known spent with no reset time, which is then by: a
// concurrency limit whose units are out), in which case only one request
// may be out at a time. A policy past its reset is refilled to its quota,
// once.
func (s *scope) state(now time.Time) (wait time.Duration, by string, blind bool) {
	wait, blind = s.blocked.Sub(now), !s.learned
	for name, p := range s.policies {
		if !p.reset.IsZero() && !p.reset.After(now) {
			p.remaining, p.known, p.reset = p.quota-p.inflight, p.quota > 0, time.Time{}
			p.accrued = now
		}
		p.refill(now)
		switch {
		case !p.known:
			blind = true
		case p.remaining > 0:
		case p.interval > 0:
			if w := p.next(now); w > wait {
				wait, by = w, name
			}
		case p.reset.IsZero():
			blind = true
			if wait <= 0 {
				by = name
			}
		default:
			if w := p.reset.Sub(now); w > wait {
				wait, by = w, name
			}
		}
	}
	return wait, by, blind
}

func sleepUntil(ctx context.Context, done <-chan struct{}, d time.Duration) error {
	var timer <-chan time.Time
	if d >= 0 {
		tm := time.NewTimer(d)
		defer tm.Stop()
		timer = tm.C
	}
	select {
	case <-timer:
		return nil
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// learn reads what resp says about the limits of scope s, the one admit
// counted the request against (even if MaxScopes has forgotten it since),
// and returns whether resp is a refusal that a retry may follow, and after
// how long (a Retry-After of 0 asks for one at once).
func (t *Transport) learn(s *scope, sent []*policy, resp *http.Response, err error) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range sent {
		p.inflight--
		if p.concurrent && p.known && (p.quota == 0 || p.remaining < p.quota) {
			p.remaining++ // its unit is back with its response
		}
	}
	s.inflight--
	if s.notify != nil {
		close(s.notify)
		s.notify = nil
	}
	if err != nil || resp == nil {
		return 0, false
	}
	s.learned = true
	s.reports++
	now := t.clock()
	quotas := parsePolicies(resp.Header.Values("RateLimit-Policy"))
	var held []*policy // concurrency limits whose unit the body holds
	// On a 429: whether a concurrency limit, and whether a rate limit, was
	// reported spent (see below).
	var spentConcurrency, spentRate bool
	for _, it := range parseRateLimit(resp.Header.Values("RateLimit")) {
		p := s.policies[it.name]
		if p == nil {
			if len(s.policies) >= maxPolicies && !s.forgetPolicy(now) {
				continue
			}
			p = &policy{}
			s.policies[it.name] = p
		}
		p.report = s.reports
		if q, ok := quotas[it.name]; ok {
			p.quota, p.interval, p.concurrent = q.quota, q.interval, q.concurrent
		}
		if it.r == 0 {
			spentConcurrency = spentConcurrency || p.concurrent
			spentRate = spentRate || !p.concurrent
		}
		if p.concurrent {
			// r was counted with this request in flight, if admitted; its
			// unit is back now (hold takes it while its body is open),
			// and the requests still unanswered may each hold one that r
			// did not count. Of q, this client's own unanswered requests
			// and open bodies hold one each: a client alone knows exactly,
			// so it takes the fewer of the two. Nothing resets at t: units
			// come back with responses, so a spent limit lets one request
			// out at a time (blind).
			left := it.r - p.inflight
			if !refusal(resp) {
				left++
			}
			if p.quota > 0 {
				left = min(left, p.quota-p.inflight-p.bodies)
			}
			p.remaining, p.known, p.reset = left, true, time.Time{}
			held = append(held, p)
			continue
		}
		p.refill(now)
		// The server counted r after this request; the requests still in
		// flight will each take one more. Responses overtake each other, so
		// within one reset period the count only goes down and the reset
		// only later: a late answer with a higher r is an older one. A
		// quota that refills sooner is taken back at the reset.
		if left := it.r - p.inflight; !p.known || left < p.remaining {
			p.remaining, p.accrued = left, now
		}
		p.known = true
		if reset := now.Add(time.Duration(it.t) * time.Second); reset.After(p.reset) {
			p.reset = reset
		}
	}
	if len(held) > 0 && streams(resp) {
		t.hold(s, held, resp)
	}
	var ra time.Duration
	again := false
	if refusal(resp) {
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), now); ok {
			ra, again = d, true
			if resp.StatusCode == http.StatusTooManyRequests && spentConcurrency && !spentRate {
				// Refused by a limit on requests in flight alone: its
				// Retry-After is when the server's last lease would
				// expire, a bound, not a wait (units come back as the
				// server's handlers return, usually far sooner), so the
				// scope is held for a second at most.
				ra = min(ra, time.Second)
			}
			if until := now.Add(ra); until.After(s.blocked) {
				s.blocked = until
			}
		}
		if resp.StatusCode == http.StatusTooManyRequests && !again {
			if len(quotas) > 0 || resp.Header.Get("RateLimit") != "" {
				// A server that speaks the RateLimit fields and names no
				// wait says none would help (a cost above the quota):
				// nothing to retry, and the requests that fit go on as
				// the fields allow.
				return 0, false
			}
			// Refused without a time: wait a little, not at all is a loop.
			ra, again = time.Second, true
			if until := now.Add(ra); until.After(s.blocked) {
				s.blocked = until
			}
		}
	}
	return ra, again
}

// refusal reports whether resp refuses its request: a 429, or a 503 (which
// may carry a Retry-After).
func refusal(resp *http.Response) bool {
	return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
}

// streams reports whether resp is an admitted response whose body may still
// be coming: the server's handler, and the concurrency unit it holds, may
// outlast the headers. A refusal holds no unit, and an upgraded connection
// (101) is the caller's from then on.
func streams(resp *http.Response) bool {
	switch {
	case refusal(resp), resp.StatusCode == http.StatusSwitchingProtocols:
		return false
	case resp.Body == nil, resp.Body == http.NoBody, resp.ContentLength == 0:
		return false
	}
	return true
}

// hold keeps the unit of each concurrency limit in held, which learn gave
// back with the headers, until resp's body has been read to its end or
// closed: the server releases it when its handler returns, after the last
// byte. The request counts as in flight in s until then too, so that
// requests that go one at a time wait for it; in each policy it counts as
// an open body, which the server's r counted (see learn).
func (t *Transport) hold(s *scope, held []*policy, resp *http.Response) {
	for _, p := range held {
		p.bodies++
		p.remaining--
	}
	s.inflight++
	resp.Body = &heldBody{ReadCloser: resp.Body, release: func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		for _, p := range held {
			p.bodies--
			if p.quota == 0 || p.remaining < p.quota {
				p.remaining++
			}
		}
		s.inflight--
		if s.notify != nil {
			close(s.notify)
			s.notify = nil
		}
	}}
}

// heldBody calls release once, when the body is read to its end or closed.
type heldBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.release)
	}
	return n, err
}

func (b *heldBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// maxSeconds caps a server's t and Retry-After: a week. A larger value is
// a broken server, and time.Duration would overflow long before int64.
const maxSeconds = 7 * 24 * 3600

// retryAfter parses Retry-After: delay-seconds or an HTTP-date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	// Past an int64, ParseInt gives its largest value (or its smallest)
	// with ErrRange: a wait longer than any other, capped as they are.
	if n, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, maxSeconds)) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(at.Sub(now), 0), maxSeconds*time.Second), true
}

type rateLimitItem struct {
	name string
	r, t int64
}

// parseRateLimit reads the RateLimit field: items named by a String, with
// integer parameters r and t. Malformed fields and items are ignored.
func parseRateLimit(vs []string) []rateLimitItem {
	if len(vs) == 0 {
		return nil
	}
	l, err := httpsfv.UnmarshalList(vs)
	if err != nil {
		return nil
	}
	var out []rateLimitItem
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		name, ok := it.Value.(string)
		if !ok || len(name) > maxName {
			continue
		}
		r, rok := intParam(it.Params, "r")
		tt, tok := intParam(it.Params, "t")
		if !rok || !tok || r < 0 || tt < 0 {
			continue
		}
		out = append(out, rateLimitItem{name: name, r: r, t: min(tt, maxSeconds)})
	}
	return out
}

// quotaOf is what RateLimit-Policy says of one policy.
type quotaOf struct {
	quota      int64         // the whole quota: sluice-burst where given, else q
	interval   time.Duration // a bucket's w/q; zero for a window
	concurrent bool          // qu="concurrent-requests": requests in flight
}

// parsePolicies reads RateLimit-Policy: each policy's whole quota, which is
// Sluice's sluice-burst where given (a bucket's burst), else q. A policy
// with sluice-burst is a bucket whose q units come back evenly over w
// seconds; any other is read as a window, whose units come back at its
// reset, which is right for both (a bucket read as a window only waits
// longer).
func parsePolicies(vs []string) map[string]quotaOf {
	if len(vs) == 0 {
		return nil
	}
	l, err := httpsfv.UnmarshalList(vs)
	if err != nil {
		return nil
	}
	out := map[string]quotaOf{}
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		name, ok := it.Value.(string)
		if !ok || len(name) > maxName {
			continue
		}
		q, ok := intParam(it.Params, "q")
		if !ok || q <= 0 {
			continue
		}
		qu, _ := it.Params.Get("qu")
		qo := quotaOf{quota: q, concurrent: qu == "concurrent-requests"}
		if b, ok := intParam(it.Params, "sluice-burst"); ok && b > 0 {
			qo.quota = b
			if w, ok := intParam(it.Params, "w"); ok && w > 0 && w <= maxSeconds {
				// Rounded up, so the client's refill is never faster than
				// the server's.
				qo.interval = (time.Duration(w)*time.Second + time.Duration(q) - 1) / time.Duration(q)
			}
		}
		out[name] = qo
	}
	return out
}

func intParam(p *httpsfv.Params, name string) (int64, bool) {
	if p == nil {
		return 0, false
	}
	v, ok := p.Get(name)
	if !ok {
		return 0, false
	}
	n, ok := v.(int64)
	return n, ok
}
