package sluicegrpc

import (
	"fmt"
	"strconv"
	"strings"
)

// Identity keys calls by the authenticated identity an earlier interceptor
// stored in the call's context under key (context.WithValue), after it
// validated the caller's credentials: chain that interceptor before this
// policy's. The value may be a string, a []byte, a fmt.Stringer, or any
// integer type. A call without one (not authenticated) is keyed by its
// client address instead, under the same policy.
func Identity(key any) KeyFunc {
	return func(c *Call) string {
		switch v := c.Value(key).(type) {
		case string:
			return v
		case []byte:
			return string(v)
		case int:
			return strconv.Itoa(v)
		case int8:
			return strconv.FormatInt(int64(v), 10)
		case int16:
			return strconv.FormatInt(int64(v), 10)
		case int32:
			return strconv.FormatInt(int64(v), 10)
		case int64:
			return strconv.FormatInt(v, 10)
		case uint:
			return strconv.FormatUint(uint64(v), 10)
		case uint8:
			return strconv.FormatUint(uint64(v), 10)
		case uint16:
			return strconv.FormatUint(uint64(v), 10)
		case uint32:
			return strconv.FormatUint(uint64(v), 10)
		case uint64:
			return strconv.FormatUint(v, 10)
		case fmt.Stringer:
			return v.String()
		}
		return ""
	}
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
