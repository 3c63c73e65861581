package memory

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice/internal/inproc"
)

// peekSlot is a copy of the front key's state that decisions read without
// the shard's lock (a seqlock): a key that every caller is refused is
// decided by each of them from this copy, by the algorithm's own step
// (inproc.Peeker), and its shard's lock and cache lines are never written.
// Under one hot, exhausted key, that is the difference between every
// core taking turns on one lock and each deciding on its own.
//
// It is published under the lock, by a decision on the front key that
// wrote nothing, and withdrawn under the lock by anything that changes or
// drops that key (shard.commit to the front slot, shard.dropFront, Close).
// So while it is valid it holds exactly the front key's state, and a
// decision read from it is the one the locked step would make at that
// instant. A peeked step that would write (the key admits again) is thrown
// away, and the decision is made under the lock.
//
// Every field is atomic, so that readers and the writer never race; seq is
// odd while the writer is at work, and a reader that sees it change, or
// odd, takes the lock instead.
type peekSlot struct {
	seq     atomic.Uint64
	hi      atomic.Uint64 // slotKey.hi
	meta    atomic.Uint64 // slotKey.lo | the state's length << 32 | peekValid
	expires atomic.Int64
	w       [3]atomic.Uint64 // the state, little-endian
	_       [8]byte
}

const peekValid = 1 << 40

var _ [64 - unsafe.Sizeof(peekSlot{})]byte // one cache line
var _ [unsafe.Sizeof(peekSlot{}) - 64]byte
var _ [inproc.PeekCap - inlineCap]byte // every inline state fits
var _ [inproc.PeekCap - 8*len(peekSlot{}.w)]byte

// publish makes state, k's state until expires, the copy readers decide
// from. The caller holds the shard's lock.
func (ps *peekSlot) publish(k slotKey, expires int64, state []byte) {
	var b [inproc.PeekCap]byte
	copy(b[:], state)
	s := ps.seq.Load()
	ps.seq.Store(s + 1)
	ps.hi.Store(k.hi)
	ps.meta.Store(uint64(k.lo) | uint64(len(state))<<32 | peekValid)
	ps.expires.Store(expires)
	for i := range ps.w {
		ps.w[i].Store(binary.LittleEndian.Uint64(b[8*i:]))
	}
	ps.seq.Store(s + 2)
}

// withdraw makes the copy invalid. The caller holds the shard's lock.
func (ps *peekSlot) withdraw() {
	if ps.meta.Load()&peekValid == 0 {
		return
	}
	s := ps.seq.Load()
	ps.seq.Store(s + 1)
	ps.meta.Store(0)
	ps.seq.Store(s + 2)
}

// read returns k's state, as a step at now must see it (see
// inproc.Peeker for its layout), when the copy is k's, valid and unexpired
// at now, and was not being written meanwhile. It takes no lock and writes
// nothing.
func (ps *peekSlot) read(k slotKey, now int64) (w0, w1, w2 uint64, size int, ok bool) {
	s := ps.seq.Load()
	if s&1 != 0 || ps.hi.Load() != k.hi {
		return 0, 0, 0, 0, false
	}
	m := ps.meta.Load()
	if m&peekValid == 0 || uint32(m) != k.lo || now >= ps.expires.Load() {
		return 0, 0, 0, 0, false
	}
	w0, w1, w2 = ps.w[0].Load(), ps.w[1].Load(), ps.w[2].Load()
	if ps.seq.Load() != s {
		return 0, 0, 0, 0, false
	}
	return w0, w1, w2, int(m >> 32 & 0xff), true
}
