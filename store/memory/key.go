package memory

import (
	"hash/maphash"

	"github.com/sluicehq/sluice/core"
)

// mapKey is what a key is stored under: 128 bits of two seeded hashes of
// (Namespace, Identity). The raw identity is never kept.
type mapKey [2]uint64

// pair is hashed as one comparable value, so the boundary between Namespace
// and Identity is part of what is hashed: ("a:b", "c") and ("a", "b:c") are
// different values and, but for chance, different keys.
type pair struct{ namespace, identity string }

// keyHasher turns a core.Key into a mapKey. The seeds are random per Store
// and never leave it: see the package doc for why that makes collisions a
// matter of chance that an attacker cannot aim.
type keyHasher struct{ seed0, seed1 maphash.Seed }

func newKeyHasher() keyHasher {
	return keyHasher{seed0: maphash.MakeSeed(), seed1: maphash.MakeSeed()}
}

// hash costs two passes of the runtime's map hash over the key (AES-based on
// most CPUs): about 20ns, where SHA-256 costs about 90ns. It does not
// allocate.
func (h *keyHasher) hash(k core.Key) mapKey {
	p := pair{k.Namespace, k.Identity}
	return mapKey{maphash.Comparable(h.seed0, p), maphash.Comparable(h.seed1, p)}
}
