package core

import (
	"context"
	"errors"
	"fmt"
)

// PoolConfig configures a Pool: a guaranteed base rate per tenant, and
// above it a burst pool shared by every tenant, with a cap on each
// tenant's share of the pool.
type PoolConfig struct {
	// Base is each tenant's guaranteed rate, counted per tenant. Required,
	// unless BaseFor is set.
	Base *Limiter
	// BaseFor, when set, returns the base of a tenant (tenants of different
	// sizes: a Limiter per size, not per tenant); a nil result means Base.
	BaseFor func(tenant string) *Limiter
	// Share caps what one tenant may draw from the pool, counted per
	// tenant (its Policy names its own keys: it must differ from Base's).
	// Required: without it one tenant could drain the pool.
	Share *Limiter
	// Pool is the burst capacity all tenants share, counted under one
	// identity (PoolKey). Required.
	Pool *Limiter
	// PoolKey is the pool's identity. Default "pool".
	PoolKey string
}

// Pool decides requests of many tenants against a base rate each plus a
// shared burst pool (the tenant question of multi-tenant APIs): a request
// within its tenant's base is admitted by the base alone, whatever the
// other tenants do; above it, it may draw from the pool, up to the
// tenant's share. A quiet tenant's unused pool serves a neighbour's spike;
// a spiking tenant that has used its share degrades to its base, and never
// starves the others of theirs, since no tenant's base is counted in the
// pool.
//
// A draw charges the tenant's share and then the pool (two identities,
// two slots of a cluster); when the pool refuses, the share is refunded
// (Receipt: never more than was taken), so a refused draw costs a window
// share nothing, and a bucket share the time between the draw and its
// refund (see Receipt: a flood of refused draws can drain a bucket share,
// so give the Share a window algorithm when draws are refused often). Safe
// for concurrent use.
type Pool struct {
	cfg PoolConfig
}

// PoolDecision is a Pool's answer.
type PoolDecision struct {
	Decision
	// FromPool reports that the request was admitted by the pool, above
	// the tenant's base.
	FromPool bool
}

// NewPool checks cfg and returns the Pool.
func NewPool(cfg PoolConfig) (*Pool, error) {
	if (cfg.Base == nil && cfg.BaseFor == nil) || cfg.Share == nil || cfg.Pool == nil {
		return nil, errors.New("sluice: PoolConfig needs Base (or BaseFor), Share and Pool")
	}
	baseGiven := cfg.Base != nil
	if !baseGiven {
		cfg.Base = cfg.Share // only its namespace is compared below; BaseFor decides
	}
	for _, l := range []*Limiter{cfg.Base, cfg.Share, cfg.Pool} {
		if !l.made() {
			return nil, errors.New("sluice: PoolConfig holds a Limiter not made by New")
		}
		if l.leaser != nil {
			return nil, fmt.Errorf("%w: %s holds leases; a pool's limits must be rate limits", ErrInvalidPolicy, l.alg.Name())
		}
	}
	if (baseGiven && cfg.Base.ns == cfg.Share.ns) || cfg.Base.ns == cfg.Pool.ns || cfg.Share.ns == cfg.Pool.ns {
		return nil, fmt.Errorf("%w: Base, Share and Pool need policies of their own names (they would count in one key)", ErrInvalidPolicy)
	}
	if cfg.PoolKey == "" {
		cfg.PoolKey = "pool"
	}
	return &Pool{cfg: cfg}, nil
}

// Allow is shorthand for AllowN(ctx, tenant, 1).
func (p *Pool) Allow(ctx context.Context, tenant string) (PoolDecision, error) {
	return p.AllowN(ctx, tenant, 1)
}

// AllowN admits n units for tenant from its base, or else from the pool
// within its share; a cost above the base's quota but within the share's and
// the pool's can only come from the pool. A refusal's RetryAfter is the
// base's (the wait after which the tenant's own rate admits it again,
// whatever the pool does); for a cost the base can never admit, it is the
// longer of the share's and the pool's waits (the earliest both could admit
// it: another tenant may draw first; when the share refuses, the pool is
// asked with a draw given back at once). Errors are the Limiters':
// bad input (a cost above every quota the request could be drawn from), or a
// store that could not decide.
func (p *Pool) AllowN(ctx context.Context, tenant string, n int64) (PoolDecision, error) {
	if p.cfg.Share == nil {
		return PoolDecision{}, errors.New("sluice: the Pool was not made by NewPool")
	}
	bl := p.cfg.Base
	if p.cfg.BaseFor != nil {
		if b := p.cfg.BaseFor(tenant); b != nil {
			bl = b
		} else if bl == p.cfg.Share {
			return PoolDecision{}, fmt.Errorf("%w: no base for the tenant (BaseFor returned nil and Base is unset)", ErrInvalidInput)
		}
	}
	overPool := n > p.cfg.Share.quota || n > p.cfg.Pool.quota
	never := n > bl.quota && !overPool
	var base Decision
	if never {
		// The base could never admit n, the pool may: a refusal of the
		// base's with no wait of its own, then the draw.
		if err := bl.check(tenant, 1); err != nil {
			return PoolDecision{}, err
		}
		base = Decision{Limit: bl.quota}
	} else {
		var err error
		base, err = bl.AllowN(ctx, tenant, n)
		if err != nil || base.Allowed || overPool {
			return PoolDecision{Decision: base}, err
		}
	}
	// A refusal waits for the base; one the base can never admit, for the
	// limit that refused the draw.
	refused := func(by Decision) PoolDecision {
		if never {
			base.RetryAfter = by.RetryAfter
		}
		return PoolDecision{Decision: base}
	}
	share, rc, err := p.cfg.Share.Charge(ctx, tenant, n)
	if err != nil {
		return refused(share), err
	}
	if !share.Allowed {
		if never {
			// Only the pool can serve n: after the share's wait it must
			// have room too. Ask it with a draw given back at once, and
			// wait for whichever of the two is later.
			if pool, prc, err := p.cfg.Pool.Charge(ctx, p.cfg.PoolKey, n); err == nil && pool.Allowed {
				_, _ = prc.Refund(context.WithoutCancel(ctx), n)
			} else if err == nil {
				share.RetryAfter = max(share.RetryAfter, pool.RetryAfter)
			}
		}
		return refused(share), nil
	}
	pool, err := p.cfg.Pool.AllowN(ctx, p.cfg.PoolKey, n)
	if err != nil || !pool.Allowed {
		if rc != nil {
			_, _ = rc.Refund(context.WithoutCancel(ctx), n)
		}
		return refused(pool), err
	}
	d := pool
	d.Remaining = min(share.Remaining, pool.Remaining)
	d.Limit = base.Limit
	return PoolDecision{Decision: d, FromPool: true}, nil
}
