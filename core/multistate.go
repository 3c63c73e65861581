package core

import "encoding/binary"

// The item that holds every limit's state of one identity, on a store
// without a multi-limit script: a sequence of segments, each
//
//	name length (1 byte) · name · state length (uvarint) · state
//
// keyed by the limit's name, so that a set of limits that changes (a
// tenant moved to another tier) keeps the counters of the limits it still
// has, and a write carries the segments of the limits the set leaves out
// (appendOthers), so that a limit dropped and brought back finds its
// counter (while the item lives: its TTL is the current limits'). A
// segment that does not decode ends the item: what follows reads as
// absent, as an undecodable state does for an algorithm.

type segment struct {
	name  []byte
	state []byte
}

func decodeSegments(b []byte, into []segment) []segment {
	for len(b) > 0 {
		nl := int(b[0])
		if nl == 0 || len(b) < 1+nl {
			return into
		}
		name := b[1 : 1+nl]
		b = b[1+nl:]
		sl, w := binary.Uvarint(b)
		if w <= 0 || sl > uint64(len(b)-w) {
			return into
		}
		into = append(into, segment{name: name, state: b[w : w+int(sl)]})
		b = b[w+int(sl):]
	}
	return into
}

func findSegment(segs []segment, name string) []byte {
	for i := range segs {
		if string(segs[i].name) == name {
			return segs[i].state
		}
	}
	return nil
}

func appendSegment[N string | []byte](b []byte, name N, state []byte) []byte {
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.AppendUvarint(b, uint64(len(state)))
	return append(b, state...)
}

// maxSegments bounds the segments an item carries: the current limits'
// and, after them, as many of the others as fit. A Multi asked with ever
// new limit names would otherwise grow its items without end.
const maxSegments = 2 * MaxLimits

// appendOthers appends the segments of segs whose names ls does not hold,
// as they are, while the item has fewer than maxSegments.
func appendOthers(b []byte, segs []segment, ls *Limits) []byte {
	n := len(ls.ls)
	for i := range segs {
		if n >= maxSegments {
			break
		}
		if ls.has(segs[i].name) {
			continue
		}
		b = appendSegment(b, segs[i].name, segs[i].state)
		n++
	}
	return b
}

// has reports whether s holds a limit of that name.
func (s *Limits) has(name []byte) bool {
	for i := range s.ls {
		if s.ls[i].p.Name == string(name) {
			return true
		}
	}
	return false
}
