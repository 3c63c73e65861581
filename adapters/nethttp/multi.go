package nethttp

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/adapters/internal/fields"
	"github.com/sluicehq/sluice/adapters/internal/receipts"
	"github.com/sluicehq/sluice/core"
)

// A multi-limit layer: several limits on one identity (core.Multi), the
// same for every request (Layer.Limits) or the identity's tier's
// (Layer.Tiers). Each limit is a RateLimit-Policy and a RateLimit item of
// its own, named by the limit.

func newMultiLayer(i int, l Layer, names map[string]bool) (layer, error) {
	switch {
	case l.Multi == nil:
		return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d] sets Limits or Tiers without Multi", i)
	case l.Limiter != nil:
		return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d] sets both Limiter and Multi; set one", i)
	case (l.Limits == nil) == (l.Tiers == nil):
		return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d].Multi needs Limits or Tiers (one of them)", i)
	case l.Weight != 0 && l.Cost != nil:
		return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d] sets both Weight and Cost; set one", i)
	case l.Weight < 0:
		return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d].Weight %d is negative", i, l.Weight)
	case l.Multi.Name() == "":
		return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d].Multi was not made by core.NewMulti", i)
	case l.Tiers != nil && l.Tiers.Names() == nil:
		return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d].Tiers was not made by core.NewTiers", i)
	case l.Limits != nil && l.Limits.Len() == 0:
		return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d].Limits holds no limit (build it with core.NewLimits)", i)
	}
	name := l.Multi.Name()
	if names[name] {
		return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d]: name %q is used twice", i, name)
	}
	names[name] = true
	ly := layer{multi: l.Multi, limits: l.Limits, tiers: l.Tiers, name: name, key: l.Key, weight: max(l.Weight, 1), cost: l.Cost}
	sets := []*core.Limits{l.Limits}
	if l.Tiers != nil {
		sets = sets[:0]
		for _, t := range l.Tiers.Names() {
			sets = append(sets, l.Tiers.Tier(t))
		}
	}
	// Limit names are RateLimit items: unique across the policy. A limit
	// name shared by tiers is one limit (one counter), so one name.
	seen := map[string]bool{}
	ly.quota = -1
	for _, ls := range sets {
		for j := 0; j < ls.Len(); j++ {
			ly.queues = ly.queues || receipts.Queues(ls.Limit(j).Algorithm)
			n := ls.Limit(j).Policy.Name
			if !seen[n] {
				if names[n] {
					return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d]: limit %q has the name of another layer or limit", i, n)
				}
				seen[n] = true
			}
		}
		if ly.quota < 0 || ls.Quota() > ly.quota {
			ly.quota = ls.Quota()
		}
	}
	for n := range seen {
		names[n] = true
		ly.limitNames = append(ly.limitNames, n)
	}
	for k, ls := range sets {
		if l.Weight > ls.Quota() {
			what := "its limits"
			if l.Tiers != nil {
				what = fmt.Sprintf("tier %q", l.Tiers.Names()[k])
			}
			return layer{}, fmt.Errorf("sluice/nethttp: Layers[%d].Weight %d exceeds %d, the most %s admit at once", i, l.Weight, ls.Quota(), what)
		}
	}
	ly.item = `"` + name + `"`
	ly.tooMany = problemBody(quotaExceeded, "", name)
	ly.unavailable = problemBody(reducedCapacity, uncheckedDetail, name)
	return ly, nil
}

// policyItems is the RateLimit-Policy items of a set of limits.
func policyItems(ls *core.Limits) string {
	var b strings.Builder
	for j := 0; j < ls.Len(); j++ {
		lm := ls.Limit(j)
		if j > 0 {
			b.WriteString(", ")
		}
		fields.AppendPolicyItem(&b, &lm.Policy, false, lm.Algorithm.Quota(&lm.Policy))
	}
	return b.String()
}

// setInfo is what a request needs of a tier's set of limits, computed
// once per set.
type setInfo struct {
	items  string // policyItems
	queues bool   // a limit may admit with a Delay (receipts.Queues)
	// unavailable is the 503 body of a store that failed, naming the
	// limits (the names of the RateLimit-Policy items), not the Multi.
	unavailable []byte
}

// maxSets bounds the sets a Policy keeps setInfo of: a tier table brings
// new sets at each Tiers.Set, and the old ones are not used again.
const maxSets = 256

// setOf returns ls's setInfo.
func (p *Policy) setOf(ls *core.Limits) *setInfo {
	if v, ok := p.sets.Load(ls); ok {
		return v.(*setInfo)
	}
	si := &setInfo{items: policyItems(ls)}
	names := make([]string, ls.Len())
	for j := range names {
		si.queues = si.queues || receipts.Queues(ls.Limit(j).Algorithm)
		names[j] = ls.Limit(j).Policy.Name
	}
	si.unavailable = problemBody(reducedCapacity, uncheckedDetail, names...)
	if p.nsets.Add(1) > maxSets {
		p.sets.Clear()
		p.nsets.Store(1)
	}
	p.sets.Store(ls, si)
	return si
}

// policyFieldFor is the RateLimit-Policy value of a request: the constant
// one, or, when a layer's limits come from tiers, one built from the
// limits each layer decided under. Either way its items come layer by
// layer, in the order RateLimit lists them.
func (p *Policy) policyFieldFor(outs []outcome) string {
	if !p.tiered {
		return p.policyField
	}
	var b strings.Builder
	for i := range p.layers {
		ly := &p.layers[i]
		if ly.tiers == nil {
			appendItems(&b, ly.policyItems)
			continue
		}
		for j := range outs {
			if ls := outs[j].limits; outs[j].layer == ly && ls != nil {
				appendItems(&b, p.setOf(ls).items)
			}
		}
	}
	return b.String()
}

// appendItems appends a layer's items to a field's value.
func appendItems(b *strings.Builder, items string) {
	if items == "" {
		return
	}
	if b.Len() > 0 {
		b.WriteString(", ")
	}
	b.WriteString(items)
}

// violatedBody is the 429 body of a refusal by a multi-limit layer, naming
// the limits that refused.
func violatedBody(states []core.LimitState) []byte {
	var refused []string
	for _, s := range states {
		if !s.Allowed {
			refused = append(refused, s.Name)
		}
	}
	return problemBody(quotaExceeded, "", refused...)
}
