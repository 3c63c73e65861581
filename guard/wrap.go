package guard

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/store"
)

// The store a Breaker hands out is one of thirty-two types: the base
// (Update) with each optional interface of the wrapped store, so that a type
// assertion on it answers as it would on the wrapped store, and a Limiter or
// a Multi over it takes the paths it takes over the wrapped store. The types
// and the switch that picks one are in wrap_gen.go, written by
// TestWrapTypesAreGenerated (go test ./guard -run TestWrapTypesAreGenerated
// -update): one more optional interface there is one more line here.

type base struct {
	b *Breaker
	s store.Store
}

func (w base) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	done, err := w.b.cb.Allow()
	if err != nil {
		return errRefused
	}
	start := time.Now()
	err = w.s.Update(ctx, key, m)
	done(w.b.outcome(ctx, err, start))
	return err
}

type runner struct {
	b *Breaker
	r store.ScriptRunner
}

func (w runner) RunScript(ctx context.Context, s *store.Script, key store.Key, args store.ScriptArgs) (store.ScriptResult, error) {
	done, err := w.b.cb.Allow()
	if err != nil {
		return store.ScriptResult{}, errRefused
	}
	start := time.Now()
	r, err := w.r.RunScript(ctx, s, key, args)
	done(w.b.outcome(ctx, err, start))
	return r, err
}

type multiRunner struct {
	b *Breaker
	m store.MultiScriptRunner
}

func (w multiRunner) RunMultiScript(ctx context.Context, s *store.Script, keys []store.Key, args []int64, reply []int64) ([]int64, error) {
	done, err := w.b.cb.Allow()
	if err != nil {
		return reply, errRefused
	}
	start := time.Now()
	reply, err = w.m.RunMultiScript(ctx, s, keys, args, reply)
	done(w.b.outcome(ctx, err, start))
	return reply, err
}

type deleter struct {
	b *Breaker
	d store.Deleter
}

func (w deleter) Delete(ctx context.Context, key store.Key) error {
	done, err := w.b.cb.Allow()
	if err != nil {
		return errRefused
	}
	start := time.Now()
	err = w.d.Delete(ctx, key)
	done(w.b.outcome(ctx, err, start))
	return err
}

type closer struct {
	b *Breaker
	c store.Closer
}

// Close stops the breaker (Breaker.Stop) and closes the store.
func (w closer) Close() error {
	w.b.Stop()
	return w.c.Close()
}

type skewer struct{ k store.ClockSkewer }

func (w skewer) ClockSkew() time.Duration { return w.k.ClockSkew() }

// wrap returns s behind b, as the type with s's optional interfaces.
func wrap(b *Breaker, s store.Store) store.Store {
	r, hasR := s.(store.ScriptRunner)
	d, hasD := s.(store.Deleter)
	c, hasC := s.(store.Closer)
	k, hasK := s.(store.ClockSkewer)
	m, hasM := s.(store.MultiScriptRunner)
	mask := 0
	for i, has := range [...]bool{hasR, hasD, hasC, hasK, hasM} {
		if has {
			mask |= 1 << i
		}
	}
	return wrapAs(mask, base{b, s}, runner{b, r}, deleter{b, d}, closer{b, c}, skewer{k}, multiRunner{b, m})
}
