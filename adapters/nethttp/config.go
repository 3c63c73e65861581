package nethttp

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/adapters/internal/fields"
	"github.com/sluicehq/sluice/adapters/internal/receipts"
	"github.com/sluicehq/sluice/core"
)

// Config is one HTTP policy: the limits a request must pass, who the client
// is, which requests are not limited, and which header fields are written.
// NewPolicy checks it once; a Config it rejects never reaches a request.
type Config struct {
	// Layers are the limits every request must pass, in order; at least
	// one. A request is admitted only if every layer admits it. Evaluation
	// stops at the first layer that denies it or cannot decide: the layers
	// after it are not charged. By default the units earlier rate layers
	// took are refunded (core.Receipt: never more than they took, never
	// into another window); leases already taken by earlier concurrency
	// layers are released at once. Put the coarse layers first and the
	// concurrency layer last, so a lease is never held for a request that
	// is refused.
	Layers []Layer

	// NoRefund keeps the units that earlier rate layers took for a request
	// a later layer refused (or could not decide), as before refunds
	// existed: one store call fewer per refusal, at the cost of charging
	// refused requests. The default refunds: a refused request then costs
	// an earlier window layer nothing, and an earlier bucket layer the
	// time between its charge and the refund, which a flood of refused
	// requests adds up (core.Receipt: give a layer that many refusals
	// follow, a per-IP one before a per-user one, a window algorithm).
	NoRefund bool

	// SkipPaths are request paths that are never limited (health checks,
	// metrics) and get no rate-limit fields. An entry is an exact path
	// ("/healthz"), or a subtree when it ends in "/" ("/debug/" matches
	// "/debug/" and everything under it); "/" alone is the root path only,
	// never the whole site. A request path is only matched
	// when it is already clean (no "//", "." or ".." segments, escaped
	// ones included), so "/healthz/../admin" and "/debug/%2e%2e/admin" are
	// limited like any other path, and as the client sent it: "/%68ealthz" or "/debug%2Fx", which a router may route on as
	// they are, is not "/healthz" or "/debug/x". The path alone is
	// matched, whatever the Host: a ServeMux with host patterns
	// ("api.example.com/") routes a skipped path to a host's handler when
	// the client names that host, so register no host-specific handler
	// under a skipped path (or limit it with a Middleware of its own).
	// Entries must start with "/" and be clean themselves.
	SkipPaths []string

	// Skip, when set, reports further requests that are not limited. It is
	// called after SkipPaths, before any store call.
	Skip func(q *Request) bool

	// TrustedProxies lists the proxies whose forwarding header is believed,
	// as CIDR prefixes ("10.0.0.0/8", "2001:db8::/32") or single addresses.
	// Empty (the default) means the client is always the connection's
	// remote address and forwarding headers are ignored.
	TrustedProxies []string

	// ProxyHeader names the forwarding header read when the direct peer is
	// a trusted proxy: "X-Forwarded-For" (the default) or "Forwarded" (RFC
	// 7239). Only one is ever read: a proxy that writes one of them usually
	// passes the other through from the client untouched.
	ProxyHeader string

	// IPv4Prefix and IPv6Prefix group client addresses into one identity:
	// every IPv4 client in the same /IPv4Prefix, every IPv6 client in the
	// same /IPv6Prefix shares a quota. Defaults 32 and 64 (one IPv6 /64 is
	// what a single subscriber usually gets, so limiting a single IPv6
	// address would be no limit at all). Ranges 1..32 and 1..128.
	IPv4Prefix int
	IPv6Prefix int

	// LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (delta seconds) for the most constrained layer, for
	// clients that predate the IETF fields.
	LegacyHeaders bool
}

// Layer is one limit of a Config, or several limits on one identity.
type Layer struct {
	// Limiter decides the layer; it, or Multi, is required. A Limiter
	// whose algorithm holds leases (core.Leaser: the concurrency limit) is
	// a concurrency layer: each admitted request holds one lease until its
	// handler returns.
	Limiter *core.Limiter

	// Multi, with Limits or Tiers, makes the layer several limits on one
	// identity, decided at once (core.Multi): admitted only if every limit
	// admits, a refusal charging none. Limits are the same for every
	// request; Tiers picks them per request, from the identity's plan (its
	// resolver gets the value of the layer's Key, or the client address's
	// identity when there is none). Each limit gets a RateLimit-Policy and
	// a RateLimit item of its own, named by the limit (so limit names must
	// differ from every other layer's and limit's); Retry-After is the
	// longest wait over the limits that refused. NewPolicy keeps the other
	// names out of the Tiers (Tiers.Exclude), so that a later Tiers.Set
	// that would bring one is refused; what a Set brings is otherwise
	// served as the tiers NewPolicy saw, a limit that queues included.
	Multi  *core.Multi
	Limits *core.Limits
	Tiers  *core.Tiers

	// Key picks the identity a request is counted under. Nil means the
	// client address (see Request.Client). When Key returns "", the client
	// address is used instead, so a request is never unlimited because its
	// key is missing. A key k is counted under KeyIdentity(k), which
	// the layer's Limiter takes to Reset it (a multi-limit layer's Multi
	// takes it with the layer's limits; for Tiers, the limits that
	// Resolve gives for k itself). Keys are hashed by core before they
	// reach a store and are never written to a response.
	Key KeyFunc

	// Weight is the fixed cost of every request, in units: 0 means 1. It
	// must not exceed the limiter's Quota (NewPolicy checks). Concurrency
	// layers take one lease per request and accept no Weight or Cost.
	Weight int64

	// Cost, when set, computes the cost per request instead of Weight. A
	// result below 1 is charged as 1 (a cost function cannot make a
	// request free); a result above the limiter's Quota can never be
	// admitted and is answered 429 without Retry-After.
	Cost CostFunc
}

// KeyFunc returns the identity a request is counted under, or "" for the
// client address. It runs on every limited request and must be safe for
// concurrent use.
type KeyFunc func(q *Request) string

// CostFunc returns the units a request costs. It runs on every limited
// request and must be safe for concurrent use.
type CostFunc func(q *Request) int64

// Header names the policy writes, in their canonical form.
const (
	HeaderRateLimit       = "Ratelimit"
	HeaderRateLimitPolicy = "Ratelimit-Policy"
	HeaderRetryAfter      = "Retry-After"
	HeaderLegacyLimit     = "X-Ratelimit-Limit"
	HeaderLegacyRemaining = "X-Ratelimit-Remaining"
	HeaderLegacyReset     = "X-Ratelimit-Reset"
	headerXFF             = "X-Forwarded-For"
	headerForwarded       = "Forwarded"
)

// Policy is a checked Config, shared by the net/http, gin and echo
// adapters. It is immutable and safe for concurrent use.
type Policy struct {
	layers      []layer
	policyField string // the RateLimit-Policy value: constant for a Policy
	skipExact   map[string]struct{}
	skipTree    []string
	skip        func(q *Request) bool
	proxies     []netip.Prefix
	forwarded   bool // read Forwarded rather than X-Forwarded-For
	v4bits      int
	v6bits      int
	legacy      bool
	refund      bool // refund earlier layers' units on a refusal
	tiered      bool // a layer's limits come from Tiers: RateLimit-Policy is built per request
	// sets is what a request needs of a tier's limits, by the set
	// (*core.Limits → *setInfo); a Tiers.Set brings new sets, so it is
	// cleared past maxSets of them (nsets).
	sets  sync.Map
	nsets atomic.Int64
}

// layer is a Layer with everything a request needs computed once.
type layer struct {
	lim    *core.Limiter
	multi  *core.Multi
	limits *core.Limits
	tiers  *core.Tiers
	name   string
	quota  int64
	leaser bool
	queues bool // it may admit with a Delay (receipts.Queues); for tiers, at NewPolicy (see setInfo)
	shadow bool // the limiter is in shadow mode: no fields
	// limitNames are a multi-limit layer's limits' names (every tier's),
	// until NewPolicy has kept the other names out of its Tiers.
	limitNames []string
	key        KeyFunc
	weight     int64
	cost       CostFunc
	// Precomputed response parts, so a denial costs no formatting.
	item        string // the policy name as a structured-field String
	policyItems string // its RateLimit-Policy items; none for a shadow or a tiered layer
	tooMany     []byte // the 429 problem body
	unavailable []byte // the 503 problem body
}

// NewPolicy checks cfg and returns the Policy every adapter serves. Every
// mistake in cfg is reported here, naming the field, never at request time.
func NewPolicy(cfg Config) (*Policy, error) {
	if len(cfg.Layers) == 0 {
		return nil, errors.New("sluice/nethttp: Config.Layers is empty: at least one limit is needed")
	}
	p := &Policy{skip: cfg.Skip, legacy: cfg.LegacyHeaders, refund: !cfg.NoRefund}
	names := make(map[string]bool, len(cfg.Layers))
	for i, l := range cfg.Layers {
		if l.Multi != nil || l.Limits != nil || l.Tiers != nil {
			ly, err := newMultiLayer(i, l, names)
			if err != nil {
				return nil, err
			}
			if ly.tiers != nil {
				p.tiered = true
			} else {
				ly.policyItems = policyItems(ly.limits)
			}
			p.layers = append(p.layers, ly)
			continue
		}
		if l.Limiter == nil {
			return nil, fmt.Errorf("sluice/nethttp: Layers[%d].Limiter is nil (set Limiter, or Multi with Limits or Tiers)", i)
		}
		pol := l.Limiter.Policy()
		if pol.Name == "" {
			return nil, fmt.Errorf("sluice/nethttp: Layers[%d].Limiter was not made by core.New", i)
		}
		if names[pol.Name] {
			return nil, fmt.Errorf("sluice/nethttp: Layers[%d]: policy name %q is used by two layers; each layer needs its own name (it names the layer's counters and its RateLimit item)", i, pol.Name)
		}
		names[pol.Name] = true
		ly := layer{lim: l.Limiter, name: pol.Name, quota: l.Limiter.Quota(), key: l.Key, weight: l.Weight, cost: l.Cost}
		_, ly.leaser = l.Limiter.Algorithm().(core.Leaser)
		ly.queues = receipts.Queues(l.Limiter.Algorithm())
		ly.shadow = l.Limiter.Shadow()
		switch {
		case ly.leaser && (l.Weight != 0 || l.Cost != nil):
			return nil, fmt.Errorf("sluice/nethttp: Layers[%d] (%s) is a concurrency limit: each request holds one lease, so Weight and Cost must be unset", i, pol.Name)
		case l.Weight < 0 || l.Weight > ly.quota:
			return nil, fmt.Errorf("sluice/nethttp: Layers[%d].Weight %d is outside 0..%d (the quota of policy %q)", i, l.Weight, ly.quota, pol.Name)
		case l.Weight != 0 && l.Cost != nil:
			return nil, fmt.Errorf("sluice/nethttp: Layers[%d] sets both Weight and Cost; set one", i)
		}
		if ly.weight == 0 {
			ly.weight = 1
		}
		ly.item = `"` + pol.Name + `"`
		ly.tooMany = problemBody(quotaExceeded, "", pol.Name)
		ly.unavailable = problemBody(reducedCapacity, uncheckedDetail, pol.Name)
		if !ly.shadow { // a shadow layer never refuses: announcing it would make clients wait for it
			var item strings.Builder
			fields.AppendPolicyItem(&item, &pol, ly.leaser, ly.quota)
			ly.policyItems = item.String()
		}
		p.layers = append(p.layers, ly)
	}
	var field strings.Builder
	for i := range p.layers {
		appendItems(&field, p.layers[i].policyItems)
	}
	p.policyField = field.String()

	if err := p.setSkipPaths(cfg.SkipPaths); err != nil {
		return nil, err
	}
	for i, s := range cfg.TrustedProxies {
		pfx, err := parseTrusted(s)
		if err != nil {
			return nil, fmt.Errorf("sluice/nethttp: TrustedProxies[%d]: %w", i, err)
		}
		p.proxies = append(p.proxies, pfx)
	}
	switch http.CanonicalHeaderKey(cfg.ProxyHeader) {
	case "", headerXFF:
	case headerForwarded:
		p.forwarded = true
	default:
		return nil, fmt.Errorf("sluice/nethttp: ProxyHeader %q: want %q or %q", cfg.ProxyHeader, headerXFF, headerForwarded)
	}
	var err error
	if p.v4bits, err = prefixBits("IPv4Prefix", cfg.IPv4Prefix, 32, 32); err != nil {
		return nil, err
	}
	if p.v6bits, err = prefixBits("IPv6Prefix", cfg.IPv6Prefix, 64, 128); err != nil {
		return nil, err
	}
	// Last, once nothing else can fail: a tiered layer's Tiers keeps every
	// other item's name out of the limits a later Set may bring.
	for i := range p.layers {
		ly := &p.layers[i]
		if ly.tiers == nil {
			continue
		}
		var others []string
		for n := range names {
			if !slices.Contains(ly.limitNames, n) {
				others = append(others, n)
			}
		}
		slices.Sort(others)
		if err := ly.tiers.Exclude(others...); err != nil {
			return nil, fmt.Errorf("sluice/nethttp: Layers[%d].Tiers: %w", i, err)
		}
		ly.limitNames = nil
	}
	return p, nil
}

// MustPolicy is NewPolicy for configurations written in code: it panics on
// an error, which a test of the program finds at once.
func MustPolicy(cfg Config) *Policy {
	p, err := NewPolicy(cfg)
	if err != nil {
		panic(err)
	}
	return p
}

func prefixBits(field string, v, def, max int) (int, error) {
	if v == 0 {
		return def, nil
	}
	if v < 1 || v > max {
		return 0, fmt.Errorf("sluice/nethttp: %s %d is outside 1..%d", field, v, max)
	}
	return v, nil
}

// parseTrusted reads "10.0.0.0/8" or "10.0.0.1".
func parseTrusted(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if pfx.Addr().Is4In6() {
			// ::ffff:10.0.0.0/104 would never match: peers are unmapped.
			return netip.Prefix{}, fmt.Errorf("%q: write IPv4-mapped prefixes in IPv4 form", s)
		}
		return pfx.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q: a trusted proxy cannot have a zone", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Layers returns the policy names of the layers, in order.
func (p *Policy) Layers() []string {
	names := make([]string, len(p.layers))
	for i := range p.layers {
		names[i] = p.layers[i].name
	}
	return names
}
