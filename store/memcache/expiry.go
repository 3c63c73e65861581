package memcache

import (
	"math"
	"time"
)

// MaxRelativeExpiration is the longest expiration, in seconds, that memcached
// reads as relative to now (30 days). It reads a larger value as an absolute
// Unix time, so a relative 30 days and 1 second would be a date in 1970: the
// item would expire at once.
const MaxRelativeExpiration = 30 * 24 * 60 * 60

// absoluteSlack is added to an absolute expiration, so that a server clock
// that steps ahead between two readings (see clockRefresh) does not drop a
// long-lived state early. Keeping a state longer never admits more; it only
// holds memory until memcached's LRU reclaims it.
const absoluteSlack = 60 * 60

// expiration converts ttl, the time after which a state may vanish by the
// clock of the instance that wrote it, into memcached's expiration field,
// lengthened by skew (see Options.ClockSkew). It never returns 0, which
// memcached reads as "never expires".
//
// Memcached counts expirations in whole seconds on a clock that ticks once
// a second, so an item set just before a tick with expiration 1 is gone a
// moment later. The TTL (a negative one counts as zero: the state may
// vanish at once) plus skew is therefore rounded up to whole seconds, at
// least one, and one second is added: the item lives at least ttl + skew,
// and at most two seconds more.
//
// Past MaxRelativeExpiration seconds, the result is an absolute Unix time
// on memcached's own clock (serverNow, read from the servers: see
// servertime.go) plus absoluteSlack, capped at math.MaxInt32 (January
// 2038), the largest memcached's field holds. It is never taken from the
// process's clock. When no server's clock is known (no Options.Servers, or
// none answered), it is MaxRelativeExpiration: the state lives 30 days
// after its last write.
func expiration(ttl, skew time.Duration, serverNow func() (int64, bool)) int32 {
	secs := relativeSeconds(ttl, skew)
	if secs <= MaxRelativeExpiration {
		return int32(secs)
	}
	now, ok := serverNow()
	return absoluteExpiration(secs, now, ok)
}

// relativeSeconds is ttl + skew in whole seconds, rounded up, at least one,
// plus the tick second.
func relativeSeconds(ttl, skew time.Duration) int64 {
	ttl = max(ttl, 0)
	if ttl > math.MaxInt64-skew {
		ttl = math.MaxInt64
	} else {
		ttl += skew
	}
	secs := int64(ttl / time.Second)
	if ttl%time.Second != 0 || secs == 0 {
		secs++
	}
	return secs + 1 // the tick second
}

// absoluteExpiration is secs (past MaxRelativeExpiration) after now, the
// server's Unix time, when known.
func absoluteExpiration(secs, now int64, known bool) int32 {
	if !known {
		return MaxRelativeExpiration
	}
	abs := now + absoluteSlack
	if abs > math.MaxInt32-secs {
		return math.MaxInt32
	}
	abs += secs
	if abs <= MaxRelativeExpiration {
		// A server clock far before 1970 would turn an absolute time back
		// into a relative one; the longest expiration is the safe answer.
		return math.MaxInt32
	}
	return int32(abs)
}
