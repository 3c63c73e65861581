package store

import (
	"crypto/sha256"
	"encoding/base64"
)

// HashBytes is how many bytes of the identity's SHA-256 a store key keeps:
// 96 bits. Two identities share a counter only by chance, about n²/2⁹⁷ for
// n identities (below 10⁻¹¹ for a billion), and on purpose only through a
// second preimage of SHA-256 truncated to 96 bits (2⁹⁶ work). A birthday
// collision an attacker could find (2⁴⁸ work) joins two identities of his
// own, which only halves their quota.
const HashBytes = 12

// HashLen is the length of the identity's hash in a key: HashBytes in
// unpadded base64url, 16 characters. The key name is most of what a small
// counter costs in Redis: with the default prefix and a policy name of up to
// 4 characters, a key of at most 30 bytes takes a 32-byte allocation, where
// the 22 characters of a 128-bit hash took 48 (measured over 100,000 keys:
// 133 bytes of used_memory a key, against 150).
const HashLen = 16

// keyEncoding writes the hash: letters, digits, '-' and '_' only, so a key
// never holds a separator, a brace, a space or a control character.
var keyEncoding = base64.RawURLEncoding

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

// String is the store key "<namespace>:{<hash>}", where <hash> is the
// first HashBytes of the identity's SHA-256 in unpadded base64url. The
// braces are a Redis Cluster hash tag: every key of one identity, under any
// policy, lands in one slot.
func (k Key) String() string {
	// A buffer of constant size stays on the stack, so the string is the
	// only allocation for namespaces up to 103 bytes; a make sized by the
	// namespace would be a second one.
	var buf [128]byte
	return string(k.AppendTo(buf[:0]))
}

// AppendTo appends String() to b.
func (k Key) AppendTo(b []byte) []byte {
	sum := sha256.Sum256([]byte(k.Identity))
	b = append(b, k.Namespace...)
	b = append(b, ':', '{')
	b = keyEncoding.AppendEncode(b, sum[:HashBytes])
	return append(b, '}')
}

// Namespace builds "<prefix>:<policy>".
func Namespace(prefix, policy string) string { return prefix + ":" + policy }
