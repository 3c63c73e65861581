package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/store"
)

// keysEnv carries to the suite's process the file it notes every key it
// touches in, so that the command can delete them when its deadline ends
// that process: a process that times out runs none of the suite's
// cleanups, and a check's keys could outlive the run by a day.
const keysEnv = "SLUICE_CONFORMANCE_KEYS"

// keyLog notes each key once, as a line of the namespace and the identity
// in hex, written before the call that touches it: a call the deadline
// cuts short may have written its key.
type keyLog struct {
	mu   sync.Mutex
	f    *os.File
	seen map[store.Key]struct{}
}

func openKeyLog(path string) (*keyLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	return &keyLog{f: f, seen: map[store.Key]struct{}{}}, nil
}

func (l *keyLog) note(k store.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[k]; ok {
		return
	}
	l.seen[k] = struct{}{}
	// One write per line, unbuffered: what was written is in the file
	// however the process ends.
	_, _ = fmt.Fprintf(l.f, "%x %x\n", k.Namespace, k.Identity)
}

// readKeyLog reads the keys a keyLog noted, by any process that wrote to
// its file (the suite's processes for the Processes check too).
func readKeyLog(path string) []store.Key {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var keys []store.Key
	seen := map[store.Key]bool{}
	// Lines of any length: an identity of the suite's may be long.
	for line := range strings.Lines(string(b)) {
		ns, id, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if !ok {
			continue
		}
		n, err1 := hex.DecodeString(ns)
		i, err2 := hex.DecodeString(id)
		if k := (store.Key{Namespace: string(n), Identity: string(i)}); err1 == nil && err2 == nil && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// logged returns s noting every key it is asked for in l. It keeps exactly
// the optional interfaces of the network stores (a script store's, or a
// compare-and-swap store's), which are what the suite asks a store for;
// any other store is returned as it is, its keys not noted.
func (l *keyLog) logged(s store.Store) store.Store {
	base, ok := s.(casStore)
	if !ok {
		return s
	}
	sr, scripts := s.(store.ScriptRunner)
	mr, multi := s.(store.MultiScriptRunner)
	switch {
	case scripts && multi:
		return loggedScripts{loggedCAS{base, l}, sr, mr}
	case scripts || multi:
		return s
	}
	return loggedCAS{base, l}
}

type casStore interface {
	store.Store
	store.Deleter
	store.Closer
	store.ClockSkewer
}

type loggedCAS struct {
	s   casStore
	log *keyLog
}

func (w loggedCAS) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	w.log.note(key)
	return w.s.Update(ctx, key, m)
}

func (w loggedCAS) Delete(ctx context.Context, key store.Key) error {
	return w.s.Delete(ctx, key)
}

func (w loggedCAS) Close() error { return w.s.Close() }

func (w loggedCAS) ClockSkew() time.Duration { return w.s.ClockSkew() }

type loggedScripts struct {
	loggedCAS
	sr store.ScriptRunner
	mr store.MultiScriptRunner
}

func (w loggedScripts) RunScript(ctx context.Context, s *store.Script, key store.Key, args store.ScriptArgs) (store.ScriptResult, error) {
	w.log.note(key)
	return w.sr.RunScript(ctx, s, key, args)
}

func (w loggedScripts) RunMultiScript(ctx context.Context, s *store.Script, keys []store.Key, args []int64, reply []int64) ([]int64, error) {
	for _, k := range keys {
		w.log.note(k)
	}
	return w.mr.RunMultiScript(ctx, s, keys, args, reply)
}

// deleteKeys deletes keys from b's store, as long as ctx lasts, and
// returns how many it could not.
func deleteKeys(ctx context.Context, b *backend, keys []store.Key) int {
	if len(keys) == 0 {
		return 0
	}
	s, closeStore, err := b.NewStore()
	if err != nil {
		return len(keys)
	}
	defer closeStore()
	d, ok := s.(store.Deleter)
	if !ok {
		return len(keys)
	}
	left := 0
	for i, k := range keys {
		if ctx.Err() != nil {
			return left + len(keys) - i
		}
		if d.Delete(ctx, k) != nil {
			left++
		}
	}
	return left
}
