package store

import (
	"crypto/sha256"
	"encoding/base64"
)

// HashBytes is how many bytes of the identity's SHA-256 a store key keeps:
// 128 bits, far past any chance of two identities sharing a counter.
const HashBytes = 16

// HashLen is the length of the identity's hash in a key: HashBytes in
// unpadded base64url, 22 characters. (Hex would take 32: the key name is
// most of what a small counter costs in Redis, and these ten bytes decide
// whether a GCRA key fits in 88 bytes or takes 104.)
const HashLen = 22

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
