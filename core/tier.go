package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
)

// TierResolver names the tier (plan) of an identity, per request: from a
// claim the authentication put in the context, a cache of the billing
// system, a prefix of the API key. An error refuses to decide (the
// adapters answer 503); an unknown or empty name gets the default tier.
type TierResolver func(ctx context.Context, identity string) (string, error)

// Tiers is a table of plans (free, pro, enterprise, …), each a set of
// limits, and a resolver from identity to plan, evaluated per request: one
// Multi serves every tenant, with no Limiter per tenant. It is safe for
// concurrent use, and Set replaces the table at runtime (a tenant upgraded,
// an incident) without a restart and without resetting any counter.
//
// Counters are kept per limit name, not per tier: a "minute" limit of
// the free tier and the "minute" limit of the pro tier count in the same
// state, so a tenant moved from one to the other keeps what it has spent.
// A limit dropped (by Set, or by a move to a tier without it) and brought
// back keeps its counters too: a script store keeps a key per limit, each
// with its own TTL; a store of one item per identity (memory, memcached)
// carries the states of the limits a decision leaves out in the item,
// which then lives as long as the identity's current limits keep it, so a
// limit brought back after its identity was quiet for longer than those
// limits' states live starts fresh there.
// So every limit of one name has, in every tier and in every table Set
// installs, the same algorithm and the same Window (Set refuses a table
// that changes either: give such a limit a new name), and every tier holds
// a limit whose algorithm has no multi-limit script (a MultiScripted
// algorithm; all of package algorithm's rate algorithms are), or none
// does: a script store keeps such a set in one item, under other keys
// (NewTiers and Set refuse a table that mixes them). Limit, Burst and
// MaxDelay may differ. A limit whose Limit (or Burst) changes applies the
// new value to the state as it stands:
//
//   - fixed window, sliding counter, sliding log, calendar: what the
//     current window (period, trailing window) has admitted counts against
//     the new Limit: a lowered limit refuses until the count is below it,
//     a raised one admits up to it;
//   - GCRA, token bucket, leaky bucket: the debt (theoretical arrival,
//     full or drain time) stays and is measured against the new Burst and
//     rate.
//
// So a change never admits more, in any window, than the larger of the
// two limits allows there, when one is at least the other in Limit, Burst
// and MaxDelay, and, for GCRA, the token bucket and the leaky bucket,
// whose state is a time, in Burst/Limit too (its bucket is as deep in
// time: tiers that scale Limit and Burst together); the algorithm
// package's tests prove it for each (TestLimitChangeNeverExceedsTheLarger). A GCRA change from
// "6/s, burst 6" to "3/s, burst 5" may admit up to 8 at one instant: the
// debt of 6 units at 1/6 s is 1 s, and the smaller policy tolerates 5/3 s.
//
// Where the Limiter clamps states for a store's ClockSkew s (memcached, the
// generic path of Redis and Valkey, the memory store with a Config.Clock;
// not scripts, not the memory store on its own clock), a time state more
// than B·T + s ahead of now is read as the work of a fast clock (see the
// algorithm package's doc) and pulled back, also under a shallower policy
// (smaller B·T) than the one that wrote it: each change from the deeper
// to the shallower forgives the debt beyond B·T + s of the shallower, up to
// the deeper policy's whole depth, and the deeper one may then admit that
// much again. Tiers whose buckets are equally deep in time (Burst/Limit)
// forgive nothing; between others, on such a store, the bound above holds
// only up to that much per change.
type Tiers struct {
	resolve TierResolver
	def     string
	table   atomic.Pointer[tierTable]
}

type tierTable struct {
	sets  map[string]*Limits
	names []string
	kinds map[string]limitKind // limit name → what may not change
	// excluded are names no limit may take (Exclude): the other RateLimit
	// items of the policies the tiers serve.
	excluded map[string]bool
	// scripted is whether the sets share the multi-limit script (every
	// tier's, and every table's that Set installs): on a script store the
	// script's keys (one per limit) and the one-item path's differ.
	scripted bool
}

type limitKind struct {
	alg    string
	window int64
}

// NewTiers checks table (each tier a set of limits, NewLimits) and returns
// the Tiers. def names the tier of an identity whose tier the resolver does
// not name (it must be in table); a nil resolve gives every identity def.
func NewTiers(table map[string][]Limit, def string, resolve TierResolver) (*Tiers, error) {
	t := &Tiers{resolve: resolve, def: def}
	tt, err := buildTiers(table, def, nil)
	if err != nil {
		return nil, err
	}
	t.table.Store(tt)
	return t, nil
}

// Set replaces the table. The default tier must stay in it, a limit name
// already in use keeps its algorithm and Window, and no limit may take a
// name Exclude kept out; the counters of every identity carry over (see
// the Tiers doc for a limit dropped and brought back). Decisions already
// under way finish under the table they began with. A table Set refuses
// changes nothing.
func (t *Tiers) Set(table map[string][]Limit) error {
	for {
		old := t.table.Load()
		if old == nil {
			return errTiersNotMade
		}
		tt, err := buildTiers(table, t.def, old)
		if err != nil {
			return err
		}
		if t.table.CompareAndSwap(old, tt) {
			return nil
		}
	}
}

// Exclude keeps names out of the tiers' limits from now on: Set refuses a
// table with a limit of one of these names. It fails, changing nothing,
// when a limit of the table in use has one. A door that serves the tiers
// beside other limits calls it (nethttp.NewPolicy: a limit's name is a
// RateLimit item, unique in a response), so that a later Set cannot give
// a client two items of one name. Names add up over calls.
func (t *Tiers) Exclude(names ...string) error {
	for {
		old := t.table.Load()
		if old == nil {
			return errTiersNotMade
		}
		for _, n := range names {
			if inTable(old, n) {
				return fmt.Errorf("%w: a tier has a limit named %q, which is kept out of the table", ErrInvalidPolicy, n)
			}
		}
		tt := *old
		tt.excluded = make(map[string]bool, len(old.excluded)+len(names))
		for n := range old.excluded {
			tt.excluded[n] = true
		}
		for _, n := range names {
			tt.excluded[n] = true
		}
		if t.table.CompareAndSwap(old, &tt) {
			return nil
		}
	}
}

// inTable reports whether a tier of tt has a limit named n.
func inTable(tt *tierTable, n string) bool {
	for _, ls := range tt.sets {
		for i := range ls.ls {
			if ls.ls[i].p.Name == n {
				return true
			}
		}
	}
	return false
}

func buildTiers(table map[string][]Limit, def string, prev *tierTable) (*tierTable, error) {
	if _, ok := table[def]; !ok {
		return nil, fmt.Errorf("%w: the default tier %q is not in the table", ErrInvalidPolicy, def)
	}
	tt := &tierTable{sets: make(map[string]*Limits, len(table)), kinds: map[string]limitKind{}}
	pathOf := ""
	if prev != nil {
		for k, v := range prev.kinds {
			tt.kinds[k] = v
		}
		tt.scripted, pathOf = prev.scripted, "the table in use"
		tt.excluded = prev.excluded // never written once installed
	}
	names := make([]string, 0, len(table))
	for name := range table {
		names = append(names, name)
	}
	sort.Strings(names) // so that an error names the same tiers every time
	for _, name := range names {
		limits := table[name]
		if name == "" {
			return nil, fmt.Errorf("%w: a tier has an empty name", ErrInvalidPolicy)
		}
		ls, err := NewLimits(limits...)
		if err != nil {
			return nil, fmt.Errorf("tier %q: %w", name, err)
		}
		for i := range ls.ls {
			l := &ls.ls[i]
			if tt.excluded[l.p.Name] {
				return nil, fmt.Errorf("%w: tier %q: limit %q has the name of another limit or layer of a policy the tiers serve (Exclude)", ErrInvalidPolicy, name, l.p.Name)
			}
			k := limitKind{alg: fmt.Sprintf("%s %v", l.alg.Name(), l.alg), window: l.p.WindowMicros()}
			if was, ok := tt.kinds[l.p.Name]; ok && was != k {
				return nil, fmt.Errorf("%w: tier %q: limit %q changes its algorithm or Window (%s per %dµs, was %s per %dµs); its counters would not carry over: give it a new name",
					ErrInvalidPolicy, name, l.p.Name, k.alg, k.window, was.alg, was.window)
			}
			tt.kinds[l.p.Name] = k
		}
		if scripted := ls.script != nil; pathOf == "" {
			tt.scripted, pathOf = scripted, fmt.Sprintf("tier %q", name)
		} else if scripted != tt.scripted {
			one, other := fmt.Sprintf("tier %q", name), pathOf
			if scripted {
				one, other = other, one
			}
			return nil, fmt.Errorf("%w: %s has a limit whose algorithm has no multi-limit script (MultiScripted) and %s has none: on a script store the two are kept under different keys, so a tenant moved between them would not keep its counters; give every tier such a limit, or none",
				ErrInvalidPolicy, one, other)
		}
		tt.sets[name] = ls
		tt.names = append(tt.names, name)
	}
	return tt, nil
}

// Names returns the tiers, sorted.
func (t *Tiers) Names() []string {
	if tt := t.table.Load(); tt != nil {
		return append([]string(nil), tt.names...)
	}
	return nil
}

// Tier returns the limits of the named tier, or nil.
func (t *Tiers) Tier(name string) *Limits {
	if tt := t.table.Load(); tt != nil {
		return tt.sets[name]
	}
	return nil
}

// errTiersNotMade is the error of a Tiers that NewTiers did not make.
var errTiersNotMade = errors.New("sluice: the Tiers was not made by NewTiers")

// Default is the default tier's name.
func (t *Tiers) Default() string { return t.def }

// Resolve returns identity's tier and its limits. Errors are the
// resolver's, wrapped.
func (t *Tiers) Resolve(ctx context.Context, identity string) (string, *Limits, error) {
	tt := t.table.Load()
	if tt == nil {
		return "", nil, errTiersNotMade
	}
	name := t.def
	if t.resolve != nil {
		n, err := t.resolve(ctx, identity)
		if err != nil {
			return "", nil, fmt.Errorf("sluice: resolving the tier of an identity: %w", err)
		}
		if _, ok := tt.sets[n]; ok {
			name = n
		}
	}
	return name, tt.sets[name], nil
}

// ErrNoTier is what a TierResolver may return when it cannot name a tier
// and the request should not be decided (an unknown API key).
var ErrNoTier = errors.New("sluice: no tier for the identity")
