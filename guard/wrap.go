package guard

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/store"
)

// The store a Breaker hands out is one of sixteen types: the base (Update)
// with each optional interface of the wrapped store, so that a type
// assertion on it answers as it would on the wrapped store.

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

type closer struct{ c store.Closer }

func (w closer) Close() error { return w.c.Close() }

type skewer struct{ k store.ClockSkewer }

func (w skewer) ClockSkew() time.Duration { return w.k.ClockSkew() }

type store0 struct {
	base
}

type storeR struct {
	base
	runner
}

type storeD struct {
	base
	deleter
}

type storeRD struct {
	base
	runner
	deleter
}

type storeC struct {
	base
	closer
}

type storeRC struct {
	base
	runner
	closer
}

type storeDC struct {
	base
	deleter
	closer
}

type storeRDC struct {
	base
	runner
	deleter
	closer
}

type storeK struct {
	base
	skewer
}

type storeRK struct {
	base
	runner
	skewer
}

type storeDK struct {
	base
	deleter
	skewer
}

type storeRDK struct {
	base
	runner
	deleter
	skewer
}

type storeCK struct {
	base
	closer
	skewer
}

type storeRCK struct {
	base
	runner
	closer
	skewer
}

type storeDCK struct {
	base
	deleter
	closer
	skewer
}

type storeRDCK struct {
	base
	runner
	deleter
	closer
	skewer
}

// wrap returns s behind b, as the type with s's optional interfaces.
func wrap(b *Breaker, s store.Store) store.Store {
	r, hasR := s.(store.ScriptRunner)
	d, hasD := s.(store.Deleter)
	c, hasC := s.(store.Closer)
	k, hasK := s.(store.ClockSkewer)
	mask := 0
	for i, has := range [4]bool{hasR, hasD, hasC, hasK} {
		if has {
			mask |= 1 << i
		}
	}
	w := base{b, s}
	switch mask {
	case 0:
		return store0{w}
	case 1:
		return storeR{w, runner{b, r}}
	case 2:
		return storeD{w, deleter{b, d}}
	case 3:
		return storeRD{w, runner{b, r}, deleter{b, d}}
	case 4:
		return storeC{w, closer{c}}
	case 5:
		return storeRC{w, runner{b, r}, closer{c}}
	case 6:
		return storeDC{w, deleter{b, d}, closer{c}}
	case 7:
		return storeRDC{w, runner{b, r}, deleter{b, d}, closer{c}}
	case 8:
		return storeK{w, skewer{k}}
	case 9:
		return storeRK{w, runner{b, r}, skewer{k}}
	case 10:
		return storeDK{w, deleter{b, d}, skewer{k}}
	case 11:
		return storeRDK{w, runner{b, r}, deleter{b, d}, skewer{k}}
	case 12:
		return storeCK{w, closer{c}, skewer{k}}
	case 13:
		return storeRCK{w, runner{b, r}, closer{c}, skewer{k}}
	case 14:
		return storeDCK{w, deleter{b, d}, closer{c}, skewer{k}}
	default:
		return storeRDCK{w, runner{b, r}, deleter{b, d}, closer{c}, skewer{k}}
	}
}
