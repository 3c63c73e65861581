package memcache

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/sluicehq/sluice/store"
)

// MaxKeyLen is the longest key memcached accepts.
const MaxKeyLen = 250

// hashedMark starts the namespace of a key whose own namespace could not be
// sent to memcached.
const hashedMark = '#'

// Key returns the memcached key a Store uses for k: k.String() when memcached
// accepts it as it is (so that keys stay readable in memcached's own tools), and
// otherwise the same key with its namespace replaced by "#" and the hex of
// the first store.HashBytes of the namespace's SHA-256, which is always legal
// (44 bytes).
//
// The identity is hashed by core already, so only the namespace (a prefix
// the operator chose, and a policy name that Validate keeps short and clean)
// can make a key illegal: a namespace longer than 231 bytes, or one with a
// space, a control character or DEL. A namespace that starts with "#", as
// a hashed one does, is hashed too, so that no namespace's key is another's
// hashed one. core.New refuses such prefixes, so
// through a Limiter this never happens; Key still guards callers that build
// a store.Key themselves. Hashing such a namespace instead of refusing
// it keeps a misconfigured prefix from failing every call, which under
// core.FailOpen would silently lift the limit. Two different namespaces never
// share a key (short of a SHA-256 collision), and every instance derives the
// same key.
func Key(k store.Key) string {
	if legalNamespace(k.Namespace) {
		return k.String()
	}
	sum := sha256.Sum256([]byte(k.Namespace))
	ns := make([]byte, 1, 1+2*store.HashBytes)
	ns[0] = hashedMark
	ns = hex.AppendEncode(ns, sum[:store.HashBytes])
	return store.Key{Namespace: string(ns), Identity: k.Identity}.String()
}

// keySuffixLen is the length of what store.Key.String appends to the
// namespace: ":{" + the identity's hash + "}".
const keySuffixLen = 2 + store.HashLen + 1

// legalNamespace reports whether ns followed by keySuffixLen bytes of hash
// and punctuation is a legal memcached key: at most MaxKeyLen bytes, with no
// space, control character or DEL (the rule gomemcache also checks), and
// one that cannot be taken for a hashed namespace (no leading hashedMark).
func legalNamespace(ns string) bool {
	if len(ns)+keySuffixLen > MaxKeyLen || ns != "" && ns[0] == hashedMark {
		return false
	}
	for i := 0; i < len(ns); i++ {
		if c := ns[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
