package valkey

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/store"
	valkeygo "github.com/valkey-io/valkey-go"
)

// casScript is the store's compare-and-set: write ARGV[2] with a TTL of
// ARGV[3] ms if KEYS[1] still holds ARGV[1]. An absent key reads as false
// in Lua, which equals no string, so it never matches: absent keys take
// SET NX instead. Nor does a key that has become of another type (pcall:
// GET's WRONGTYPE error is a value that equals no string), which Load then
// reads as absent. Replies 1 when it wrote, 0 when another writer got
// there first.
var casScript = store.NewScript("valkey-cas", `if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
`)

// Update applies m to key's state atomically, for algorithms without a Lua
// twin (or limiters with Config.NoScript): GET, m.Apply, then a
// compare-and-set (the store's own small script, or SET NX for an absent
// key; a key of another type reads as absent and a script of its own
// replaces it), retried on a conflict by store.CASUpdate within
// Options.Retry. The key's TTL is the algorithm's, plus Options.ClockSkew.
//
// Errors are *store.Error matching core.ErrUnavailable: a network error
// or deadline (matching core.ErrOutcomeUnknown too when it came after a
// compare-and-set was sent), or a *store.ContentionError when every attempt
// lost a race. Update is safe for concurrent use.
func (s *Store) Update(ctx context.Context, key store.Key, m store.Mutation) error {
	if err := s.ready(ctx, "update"); err != nil {
		return err
	}
	if m == nil {
		return &store.Error{Op: "update", Err: errNoMutation}
	}
	_, err := store.CASUpdate(ctx, (*casBackend)(s), key.String(), m, s.retry)
	if err != nil {
		var se *store.Error
		if !errors.As(err, &se) {
			err = &store.Error{Op: "update", Err: err}
		}
	}
	return err
}

var errNoMutation = errors.New("sluice/valkey: nil mutation")

// casBackend gives store.CASUpdate the store's Load and Swap without adding
// them to Store's method set.
type casBackend Store

// Load reads key with GET. The token is the state as read, which the swap
// compares byte for byte. valkey-go may retry a GET after a network error;
// a read can be repeated safely.
func (b *casBackend) Load(ctx context.Context, key string) ([]byte, any, error) {
	resp := b.sh.Do(ctx, b.c.B().Get().Key(key).Build())
	v, err := resp.ToString()
	switch {
	case valkeygo.IsValkeyNil(err):
		return nil, nil, nil
	case isWrongType(err):
		// A key of another type is not an algorithm's state: it reads as
		// absent, as undecodable state does, and the swap replaces it.
		return nil, foreignKey{}, nil
	case err != nil:
		return nil, nil, storeError("update", err, false)
	}
	// Apply may write into the state's array: give it a copy of its own.
	return []byte(v), v, nil
}

// Swap writes next if key still holds token (or, for a nil token, is still
// absent). It is sent once: valkey-go never retries a write.
func (b *casBackend) Swap(ctx context.Context, key string, token any, next []byte, ttl time.Duration) (bool, error) {
	ms := pxMillis(ttl + b.skew)
	c, sh := b.c, b.sh
	if token == nil {
		resp := sh.Do(ctx, c.B().Set().Key(key).Value(string(next)).Nx().PxMilliseconds(ms).Build())
		if err := resp.Error(); err != nil {
			if valkeygo.IsValkeyNil(err) { // NX refused: someone created it first
				return false, nil
			}
			return false, storeError("update", err, true)
		}
		return true, nil
	}
	sc, argv := casScript, [3]string{"", string(next), strconv.FormatInt(ms, 10)}
	args := argv[:]
	if _, ok := token.(foreignKey); ok {
		sc, args = casForeignScript, argv[1:]
	} else {
		argv[0], _ = token.(string)
	}
	resp := sh.Do(ctx, c.B().Evalsha().Sha1(sc.Hash).Numkeys(1).Key(key).Arg(args...).Build())
	if isNoScript(resp.Error()) {
		resp = sh.Do(ctx, c.B().Eval().Script(sc.Source).Numkeys(1).Key(key).Arg(args...).Build())
	}
	n, err := resp.ToInt64()
	if err != nil {
		return false, storeError("update", err, true)
	}
	return n == 1, nil
}

// foreignKey is Load's token for a key of another type than a string (a
// hash, a list, a set...: written by other software, by hand, or by a
// Limiter with a script over the same key).
type foreignKey struct{}

// casForeignScript replaces a key of another type than a string with
// ARGV[1], with a TTL of ARGV[2] ms, and replies 1; if the key is now a
// string or absent (another writer got there first), it writes nothing and
// replies 0, and the update starts over.
var casForeignScript = store.NewScript("valkey-cas-foreign", `local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'string' and t ~= 'none' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
`)

// isWrongType reports a WRONGTYPE reply: the command met a key of another
// type.
func isWrongType(err error) bool {
	verr, ok := valkeygo.IsValkeyErr(err)
	return ok && strings.HasPrefix(verr.Error(), "WRONGTYPE")
}

// ClockSkew is Options.ClockSkew as New filled it in (store.ClockSkewer):
// the generic path's TTL allowance for the fleet's clocks. A Limiter on the
// generic path clamps a stored time that lies more than this ahead of its
// own clock; scripts read the server's clock and need none.
func (s *Store) ClockSkew() time.Duration { return s.skew }

// pxMillis rounds ttl up to whole milliseconds, at least one: PX takes a
// positive integer, and an early expiry could hand a client a fresh quota.
func pxMillis(ttl time.Duration) int64 {
	ms := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	return max(ms, 1)
}
