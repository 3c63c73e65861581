// Package casscript holds what the Redis and Valkey stores' generic path
// (store.Store's Update: GET, apply, compare-and-set) shares: its two
// scripts, and the expiry they are given. Only the client differs.
package casscript

import (
	"time"

	"github.com/sluicehq/sluice/store"
)

// Swap writes ARGV[2] with a TTL of ARGV[3] ms if KEYS[1] still holds
// exactly ARGV[1], and replies 1; otherwise it writes nothing and replies
// 0. An absent (or expired) key never matches, so a writer that saw it
// absent uses SET NX instead; nor does one that has become of another type
// (pcall: GET's WRONGTYPE error is a value that equals no string), which
// the next read then finds foreign. One GET and at most one SET, nothing
// that can fail between.
var Swap = store.NewScript("sluice-cas", `if redis.pcall('GET', KEYS[1]) == ARGV[1] then
	redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
	return 1
end
return 0`)

// Foreign replaces a key of another type than a string (a hash, a list...:
// written by other software, by hand, or by a Limiter with a script over
// the same key), which the generic path reads as absent, as undecodable
// state, with ARGV[1] and a TTL of ARGV[2] ms, and replies 1. If the key is
// now a string or absent (another writer got there first), it writes
// nothing and replies 0, and the update starts over.
var Foreign = store.NewScript("sluice-cas-foreign", `local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'string' and t ~= 'none' then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	return 1
end
return 0`)

// ForeignKey is a Load's token for a key of another type than a string: its
// swap is Foreign.
type ForeignKey struct{}

// PXMillis is ttl in whole milliseconds, rounded up (a key must not expire
// before its state reads as fresh), and at least 1 (PX takes a positive
// integer).
func PXMillis(ttl time.Duration) int64 {
	ms := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	return max(ms, 1)
}
