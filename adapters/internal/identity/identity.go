// Package identity turns the value an application stored for an
// authenticated caller into the identity a limit counts it under. The HTTP
// policy and the gRPC interceptors share it, so one caller is one identity
// through every door.
package identity

import (
	"fmt"
	"reflect"
	"strconv"
)

// Of returns v as an identity: a string as it is, a []byte as its bytes,
// any integer type in decimal, a fmt.Stringer by its String, and a type of
// the application's own by its kind (type UserID string as a string); ""
// for anything else (nil, and a nil pointer, included), which the doors
// read as "no identity".
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
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			return "" // a nil *T whose String would dereference it
		}
		return v.String()
	}
	// A type of the application's own (type UserID string): by its kind.
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.String:
		return rv.String()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(rv.Uint(), 10)
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return string(rv.Bytes())
		}
	}
	return ""
}
