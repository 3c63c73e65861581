package memcache

import (
	"context"
	"sync"
	"sync/atomic"

	gomemcache "github.com/bradfitz/gomemcache/memcache"
)

// gomemcache takes no context: a call blocks until the server answers or the
// client's Timeout passes on the socket. roundTrip runs such a call so that
// the caller gets its answer by its own deadline even when the server has
// stalled, and the call still ends by itself in the background.

// verb is the one request a call sends.
type verb uint8

const (
	verbGets verb = iota
	verbAdd
	verbCas
	verbDelete
)

func (v verb) String() string {
	return [...]string{"gets", "add", "cas", "delete"}[v]
}

// Call states: who finished first.
const (
	callRunning   = 0
	callReturned  = 1 // the round trip ended and its caller took the result
	callAbandoned = 2 // the caller's context ended first
)

// call is one round trip. Calls are pooled: a call whose caller took its
// result goes back to the pool; an abandoned one is left to the collector,
// since its round trip may still be using it.
type call struct {
	s     *Store
	verb  verb
	key   string
	item  *gomemcache.Item // cas: the item to swap; gets: the item read
	add   gomemcache.Item  // add: the new item, kept here to save an allocation
	err   error
	done  chan struct{} // buffered: the round trip never blocks on a caller that left
	state atomic.Int32
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func newCall(s *Store, v verb, key string) *call {
	c := calls.Get().(*call)
	c.s, c.verb, c.key = s, v, key
	return c
}

// free returns a call whose result its caller has taken to the pool.
func (c *call) free() {
	*c = call{done: c.done}
	calls.Put(c)
}

// do sends the request and waits for the answer.
func (c *call) do() {
	switch c.verb {
	case verbGets:
		c.item, c.err = c.s.c.Get(c.key)
	case verbAdd:
		c.err = c.s.c.Add(&c.add)
	case verbCas:
		c.err = c.s.c.CompareAndSwap(c.item)
	case verbDelete:
		c.err = c.s.c.Delete(c.key)
	}
}

// fate is what became of a round trip.
type fate int

const (
	notSent   fate = iota // ctx had ended: nothing was sent
	answered              // the server answered, or the client failed; c.err says which
	abandoned             // ctx ended while the request was out: it may still act
)

// roundTrip sends c's request and waits for its answer, or returns
// abandoned when ctx ends first. ctx is checked before anything is sent. An
// abandoned request runs on until it ends by itself (the client's Timeout
// bounds it); a write that then turns out stored is counted in
// Stats.LateWrites. After answered or notSent the caller reads c and frees
// it; after abandoned it must not touch c again.
func (s *Store) roundTrip(ctx context.Context, c *call) fate {
	if c.err = ctx.Err(); c.err != nil {
		return notSent
	}
	// Counted from before it is sent, so that Close waits for it; and
	// none is sent once Close began, also by a call under way then.
	if !s.bg.Enter() {
		c.err = ErrClosed
		return notSent
	}
	if ctx.Done() == nil {
		// A context that can never end needs no watching.
		c.do()
		s.bg.Done()
		return answered
	}
	go c.run()
	select {
	case <-c.done:
		return answered
	case <-ctx.Done():
	}
	if !c.state.CompareAndSwap(callRunning, callAbandoned) {
		// The round trip ended in the meantime: its answer is good.
		<-c.done
		return answered
	}
	s.stats.abandoned.Add(1)
	return abandoned
}

func (c *call) run() {
	c.do()
	bg := &c.s.bg
	if c.state.CompareAndSwap(callRunning, callReturned) {
		// The caller may free c as soon as it hears this: touch nothing
		// after.
		bg.Done()
		c.done <- struct{}{}
		return
	}
	// Abandoned: nobody reads the call but this goroutine.
	if c.err == nil && (c.verb == verbAdd || c.verb == verbCas) {
		c.s.stats.lateWrites.Add(1)
	}
	bg.Done()
}
