// Package inflight counts a store's work that runs on after its caller
// (round trips abandoned at a deadline, connections being given back), so
// that the store's Close can wait for it: no goroutine of a store outlives
// its Close by more than that work's own bound.
package inflight

import "sync"

// Counter counts work in flight. Its zero value is ready to use.
type Counter struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   *sync.Cond
}

// Add counts one more piece of work, whether or not Close was called.
func (c *Counter) Add() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

// Enter counts one more piece of work unless Close was called, and
// reports whether it did.
func (c *Counter) Enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.n++
	return true
}

// Done ends one piece of work counted by Add or Enter.
func (c *Counter) Done() {
	c.mu.Lock()
	if c.n--; c.n == 0 && c.idle != nil {
		c.idle.Broadcast()
	}
	c.mu.Unlock()
}

// Close makes every later Enter fail.
func (c *Counter) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// Wait returns once no work is counted. Unlike a sync.WaitGroup's, it may
// run while work is added.
func (c *Counter) Wait() {
	c.mu.Lock()
	if c.idle == nil {
		c.idle = sync.NewCond(&c.mu)
	}
	for c.n > 0 {
		c.idle.Wait()
	}
	c.mu.Unlock()
}
