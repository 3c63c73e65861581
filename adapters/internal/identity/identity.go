// Package identity turns the value an application stored for an
// authenticated caller into the identity a limit counts it under. The HTTP
// policy and the gRPC interceptors share it, so one caller is one identity
// through every door.
package identity

import (
	"fmt"
	"strconv"
)

// Of returns v as an identity: a string as it is, a []byte as its bytes,
// any integer type in decimal, a fmt.Stringer by its String; "" for
// anything else (nil included), which the doors read as "no identity".
func Of(v any) string {
	switch v := v.(type) {
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
