package sluicegrpc

import (
	"strings"

	"github.com/sluicehq/sluice/adapters/internal/identity"
)

// Identity keys calls by the authenticated identity an earlier interceptor
// stored in the call's context under key (context.WithValue), after it
// validated the caller's credentials: chain that interceptor before this
// policy's. The value may be a string, a []byte, a fmt.Stringer, or any
// integer type, a type of the application's own included (type UserID
// string). A call without one (not authenticated) is keyed by its
// client address instead, under the same policy.
func Identity(key any) KeyFunc {
	return func(c *Call) string { return identity.Of(c.Value(key)) }
}

// Method keys calls by their full method name: one quota for everyone who
// calls that method (a global limit on an expensive method).
func Method(c *Call) string { return c.FullMethod }

// Metadata keys calls by the first value of the named incoming metadata key,
// as sent. The client chooses that value: use it only for a key that
// something before this policy has validated (a gateway that checks API
// keys, an auth interceptor), never to identify clients on its own. A call
// without it is keyed by its client address.
func Metadata(key string) KeyFunc {
	key = strings.ToLower(key)
	return func(c *Call) string {
		if v := c.Metadata(key); len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// KeyIdentity returns the identity under which a layer counts the calls
// its KeyFunc gives key: key set apart from client addresses, so that no
// key can collide with the address another call falls back to. Use it to
// Reset a key, or to read its state, through the layer's Limiter:
//
//	err := lim.Reset(ctx, KeyIdentity(userID))
func KeyIdentity(key string) string { return "k:" + key }
