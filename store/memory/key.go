package memory

import (
	"hash/maphash"

	"github.com/sluicehq/sluice/store"
)

// mapKey is a key's hash: 128 bits, each half a seeded hash of the
// Namespace combined with a seeded hash of the Identity. The raw identity is
// never kept. The low bits of h0 pick the shard, h1 the slot in the shard's
// table, and the slot keeps the 96 bits that tell its keys apart (slotKey).
// (A struct, not an array: Go passes a struct of two words in registers.)
type mapKey struct{ h0, h1 uint64 }

// keyHasher turns a store.Key into a mapKey. The seeds are random per Store
// and never leave it: see the package doc for why that makes collisions a
// matter of chance that an attacker cannot aim.
//
// Namespace and Identity are hashed apart, each under seeds of its own, and
// the halves combined by XOR. So the boundary between them is part of what
// is hashed (("a:b", "c") and ("a", "b:c") are, but for chance, different
// keys), and a namespace's hashes can be computed once, when a Limiter binds
// to the store (see Bind), leaving one pass over the identity per half.
type keyHasher struct {
	ns, id [2]maphash.Seed
}

// nsHash is a namespace's part of every mapKey in it.
type nsHash [2]uint64

func newKeyHasher() keyHasher {
	return keyHasher{
		ns: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		id: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
	}
}

func (h *keyHasher) namespace(ns string) nsHash {
	return nsHash{maphash.String(h.ns[0], ns), maphash.String(h.ns[1], ns)}
}

// identity returns the mapKey of identity in the namespace whose hashes are
// ns. It costs two passes of the runtime's string hash (AES-based on most
// CPUs), about 12 ns for a short identity, where SHA-256 costs about 90 ns.
// It does not allocate.
func (h *keyHasher) identity(ns nsHash, identity string) mapKey {
	return mapKey{ns[0] ^ maphash.String(h.id[0], identity), ns[1] ^ maphash.String(h.id[1], identity)}
}

func (h *keyHasher) hash(k store.Key) mapKey {
	return h.identity(h.namespace(k.Namespace), k.Identity)
}
