package core

import "encoding/binary"

// The item that holds every limit's state of one identity, on a store
// without a multi-limit script: a sequence of segments, each
//
//	name length (1 byte) · name · state length (uvarint) · state
//
// keyed by the limit's name, so that a set of limits that changes (a
// tenant moved to another tier) keeps the counters of the limits it still
// has. A segment that does not decode ends the item: what follows reads as
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

func appendSegment(b []byte, name string, state []byte) []byte {
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.AppendUvarint(b, uint64(len(state)))
	return append(b, state...)
}
