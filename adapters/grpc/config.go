package sluicegrpc

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/sluicehq/sluice/adapters/internal/fields"
	"github.com/sluicehq/sluice/adapters/internal/receipts"
	"github.com/sluicehq/sluice/core"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

// Config is one gRPC policy: the limits a call must pass, who the client
// is, and which methods are not limited. NewPolicy checks it once; a Config
// it rejects never reaches a call.
type Config struct {
	// Layers are the limits every call must pass, in order; at least one.
	// A call is admitted only if every layer admits it. Evaluation stops at
	// the first layer that refuses it or cannot decide: the layers after it
	// are not charged. The units earlier rate layers took for the call are
	// refunded (core.Receipt: never more than they took, never into another
	// window), unless NoRefund; leases already taken by earlier concurrency
	// layers are released at once. Put the coarse layers first and the
	// concurrency layer last, so a lease is never held for a call that is
	// refused.
	Layers []Layer

	// NoRefund keeps the units that earlier rate layers took for a call a
	// later layer refused (or could not decide), so that refused calls
	// still spend the quota of the earlier layers' identities. The default
	// refunds, as the HTTP policy does: a refund costs one store call per
	// earlier layer, on a refusal only, and leaves an earlier bucket layer
	// the time between its charge and the refund (core.Receipt).
	NoRefund bool

	// SkipMethods are methods that are never limited (health checks,
	// reflection) and get no rate-limit fields. An entry is a full method
	// name as grpc-go reports it, "/grpc.health.v1.Health/Check", or a
	// whole service when it ends in "/": "/grpc.health.v1.Health/".
	SkipMethods []string

	// Skip, when set, reports further calls that are not limited. It is
	// called after SkipMethods, before any store call.
	Skip func(c *Call) bool

	// TrustedProxies lists the proxies whose forwarding metadata is
	// believed, as CIDR prefixes ("10.0.0.0/8", "2001:db8::/32") or single
	// addresses. Empty (the default) means the client is always the
	// connection's peer address and forwarding metadata is ignored.
	TrustedProxies []string

	// ProxyHeader names the forwarding metadata read when the peer is a
	// trusted proxy: "x-forwarded-for" (the default) or "forwarded" (RFC
	// 7239), in any case. Only one is ever read: a proxy that writes one of
	// them usually passes the other through from the client untouched.
	ProxyHeader string

	// IPv4Prefix and IPv6Prefix group client addresses into one identity,
	// as in the HTTP policy: defaults 32 and 64, ranges 1..32 and 1..128.
	IPv4Prefix int
	IPv6Prefix int
}

// Layer is one limit of a Config.
type Layer struct {
	// Limiter decides the layer; required. A Limiter whose algorithm holds
	// leases (core.Leaser: the concurrency limit) is a concurrency layer:
	// each admitted call holds one lease until its handler returns — for a
	// stream, until the whole stream is over.
	Limiter *core.Limiter

	// Key picks the identity a call is counted under. Nil means the client
	// address (see Call.Client). When Key returns "", the client address is
	// used instead, so a call is never unlimited because its key is
	// missing. A key k is counted under KeyIdentity(k), which the layer's
	// Limiter takes to Reset it. Keys are hashed by core before they reach
	// a store and are never written to a response.
	Key KeyFunc

	// Weight is the fixed cost of every call, in units: 0 means 1. It must
	// not exceed the limiter's Quota (NewPolicy checks). Concurrency layers
	// take one lease per call and accept no Weight or Cost.
	Weight int64

	// Cost, when set, computes the cost per call instead of Weight (for a
	// unary call it may read Call.Request). A result below 1 is charged as
	// 1; a result above the limiter's Quota can never be admitted and is
	// refused with codes.ResourceExhausted and no RetryInfo.
	Cost CostFunc
}

// KeyFunc returns the identity a call is counted under, or "" for the
// client address. It runs on every limited call and must be safe for
// concurrent use.
type KeyFunc func(c *Call) string

// CostFunc returns the units a call costs. It runs on every limited call
// and must be safe for concurrent use.
type CostFunc func(c *Call) int64

// Metadata keys the policy writes (gRPC metadata keys are lower case).
const (
	MetadataRateLimit       = "ratelimit"
	MetadataRateLimitPolicy = "ratelimit-policy"
	MetadataRetryAfter      = "retry-after"
	metadataXFF             = "x-forwarded-for"
	metadataForwarded       = "forwarded"
)

// Policy is a checked Config. It is immutable and safe for concurrent use;
// UnaryServerInterceptor and StreamServerInterceptor serve it.
type Policy struct {
	layers      []layer
	refund      bool   // refund earlier layers' units on a refusal
	policyField string // the ratelimit-policy value: constant for a Policy
	skipExact   map[string]struct{}
	skipService []string
	skip        func(c *Call) bool
	proxies     []netip.Prefix
	proxyKey    string // the forwarding metadata key that is read
	forwarded   bool   // proxyKey is "forwarded" (RFC 7239)
	v4bits      int
	v6bits      int
}

// layer is a Layer with everything a call needs computed once.
type layer struct {
	lim    *core.Limiter
	name   string
	quota  int64
	leaser bool
	queues bool // it may admit with a Delay (receipts.Queues)
	key    KeyFunc
	weight int64
	cost   CostFunc
	item   string // the policy name as a structured-field String
	shadow bool   // the limiter is in shadow mode: no fields
	// violation is the google.rpc.QuotaFailure detail of a refusal.
	violation *errdetails.QuotaFailure
}

// NewPolicy checks cfg and returns the Policy the interceptors serve. Every
// mistake in cfg is reported here, naming the field, never at call time.
func NewPolicy(cfg Config) (*Policy, error) {
	if len(cfg.Layers) == 0 {
		return nil, errors.New("sluicegrpc: Config.Layers is empty: at least one limit is needed")
	}
	p := &Policy{skip: cfg.Skip, refund: !cfg.NoRefund}
	names := make(map[string]bool, len(cfg.Layers))
	var field strings.Builder
	for i, l := range cfg.Layers {
		if l.Limiter == nil {
			return nil, fmt.Errorf("sluicegrpc: Layers[%d].Limiter is nil", i)
		}
		pol := l.Limiter.Policy()
		if pol.Name == "" {
			return nil, fmt.Errorf("sluicegrpc: Layers[%d].Limiter was not made by core.New", i)
		}
		if names[pol.Name] {
			return nil, fmt.Errorf("sluicegrpc: Layers[%d]: policy name %q is used by two layers; each layer needs its own name (it names the layer's counters and its RateLimit item)", i, pol.Name)
		}
		names[pol.Name] = true
		ly := layer{lim: l.Limiter, name: pol.Name, quota: l.Limiter.Quota(), key: l.Key, weight: l.Weight, cost: l.Cost}
		_, ly.leaser = l.Limiter.Algorithm().(core.Leaser)
		ly.queues = receipts.Queues(l.Limiter.Algorithm())
		ly.shadow = l.Limiter.Shadow()
		switch {
		case ly.leaser && (l.Weight != 0 || l.Cost != nil):
			return nil, fmt.Errorf("sluicegrpc: Layers[%d] (%s) is a concurrency limit: each call holds one lease, so Weight and Cost must be unset", i, pol.Name)
		case l.Weight < 0 || l.Weight > ly.quota:
			return nil, fmt.Errorf("sluicegrpc: Layers[%d].Weight %d is outside 0..%d (the quota of policy %q)", i, l.Weight, ly.quota, pol.Name)
		case l.Weight != 0 && l.Cost != nil:
			return nil, fmt.Errorf("sluicegrpc: Layers[%d] sets both Weight and Cost; set one", i)
		}
		if ly.weight == 0 {
			ly.weight = 1
		}
		ly.item = `"` + pol.Name + `"`
		ly.violation = &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
			Subject:     pol.Name,
			Description: violationText(&pol, ly.leaser),
		}}}
		if !ly.shadow { // a shadow layer never refuses: announcing it would make clients wait for it
			if field.Len() > 0 {
				field.WriteString(", ")
			}
			fields.AppendPolicyItem(&field, &pol, ly.leaser, ly.quota)
		}
		p.layers = append(p.layers, ly)
	}
	p.policyField = field.String()

	if err := p.setSkipMethods(cfg.SkipMethods); err != nil {
		return nil, err
	}
	for i, s := range cfg.TrustedProxies {
		pfx, err := parseTrusted(s)
		if err != nil {
			return nil, fmt.Errorf("sluicegrpc: TrustedProxies[%d]: %w", i, err)
		}
		p.proxies = append(p.proxies, pfx)
	}
	switch strings.ToLower(cfg.ProxyHeader) {
	case "", metadataXFF:
		p.proxyKey = metadataXFF
	case metadataForwarded:
		p.proxyKey, p.forwarded = metadataForwarded, true
	default:
		return nil, fmt.Errorf("sluicegrpc: ProxyHeader %q: want %q or %q", cfg.ProxyHeader, metadataXFF, metadataForwarded)
	}
	var err error
	if p.v4bits, err = prefixBits("IPv4Prefix", cfg.IPv4Prefix, 32, 32); err != nil {
		return nil, err
	}
	if p.v6bits, err = prefixBits("IPv6Prefix", cfg.IPv6Prefix, 64, 128); err != nil {
		return nil, err
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

// Layers returns the policy names of the layers, in order.
func (p *Policy) Layers() []string {
	names := make([]string, len(p.layers))
	for i := range p.layers {
		names[i] = p.layers[i].name
	}
	return names
}

func violationText(p *core.Policy, concurrency bool) string {
	if concurrency {
		return fmt.Sprintf("at most %d calls in flight", p.Limit)
	}
	return fmt.Sprintf("at most %d units per %s", p.Limit, p.Window)
}

func prefixBits(field string, v, def, max int) (int, error) {
	if v == 0 {
		return def, nil
	}
	if v < 1 || v > max {
		return 0, fmt.Errorf("sluicegrpc: %s %d is outside 1..%d", field, v, max)
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

// setSkipMethods reads SkipMethods: "/service/method" or "/service/".
func (p *Policy) setSkipMethods(methods []string) error {
	for i, s := range methods {
		svc, method, ok := strings.Cut(strings.TrimPrefix(s, "/"), "/")
		if !strings.HasPrefix(s, "/") || !ok || svc == "" || strings.Contains(method, "/") {
			return fmt.Errorf("sluicegrpc: SkipMethods[%d] %q: want a full method name such as \"/grpc.health.v1.Health/Check\", or a service such as \"/grpc.health.v1.Health/\"", i, s)
		}
		if method == "" {
			p.skipService = append(p.skipService, s)
			continue
		}
		if p.skipExact == nil {
			p.skipExact = make(map[string]struct{}, len(methods))
		}
		p.skipExact[s] = struct{}{}
	}
	return nil
}

// skipMethod reports whether a full method name is in SkipMethods.
func (p *Policy) skipMethod(m string) bool {
	if _, ok := p.skipExact[m]; ok {
		return true
	}
	for _, s := range p.skipService {
		if len(m) > len(s) && strings.HasPrefix(m, s) && !strings.Contains(m[len(s):], "/") {
			return true
		}
	}
	return false
}

// seconds rounds d up to whole seconds (delay-seconds), 0 for d <= 0.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
