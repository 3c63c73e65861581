package core

import (
	"crypto/sha256"
	"encoding/hex"
)

// HashBytes is how many bytes of the identity's SHA-256 a store key keeps:
// 128 bits, far past any chance of two identities sharing a counter.
const HashBytes = 16

// Key names the state of one identity under one policy. Identity is the raw,
// possibly attacker-chosen value; it must never reach a store as it is. A
// network store writes String(); an in-process store may instead hash
// Namespace and Identity with a keyed hash of its own (the memory store does,
// because SHA-256 costs more than a whole in-memory decision).
type Key struct {
	// Namespace is "<prefix>:<policy name>", built once per Limiter.
	Namespace string
	// Identity is who is being limited: a client address, an API key, ...
	Identity string
}

// String is the store key "<namespace>:{<hex of the identity's hash>}". The
// braces are a Redis Cluster hash tag: every key of one identity, under any
// policy, lands in one slot.
func (k Key) String() string {
	return string(k.AppendTo(make([]byte, 0, len(k.Namespace)+4+2*HashBytes)))
}

// AppendTo appends String() to b.
func (k Key) AppendTo(b []byte) []byte {
	sum := sha256.Sum256([]byte(k.Identity))
	b = append(b, k.Namespace...)
	b = append(b, ':', '{')
	b = hex.AppendEncode(b, sum[:HashBytes])
	return append(b, '}')
}

// Namespace builds "<prefix>:<policy>".
func Namespace(prefix, policy string) string { return prefix + ":" + policy }
