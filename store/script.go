package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// Script is the Lua twin of an algorithm: the same step, run inside the
// server in one round trip. Scripts are built once, as package-level values.
type Script struct {
	Name   string
	Source string
	// Hash is the hex SHA-1 of Source, for EVALSHA.
	Hash string
	// Args are the fields of ScriptArgs the script reads, in the order a
	// store passes them as ARGV[1..len(Args)]. A script reads only what it
	// declares: every argument the server need not parse is time saved on
	// every call (the server turns each one into a Lua string).
	Args []ScriptArg
	// Optional is how many of the last Args a call may leave out, from the
	// end, while each holds its default: ArgNow 0 (the server's clock),
	// ArgN 1. The script reads an absent one as its default. Every
	// argument left out is one the server need not turn into a string, and
	// the arguments before stay where they are. Zero: every call sends all
	// of Args.
	Optional int
	// Decode, when not nil, expands a reply of one integer into the six
	// values of a ScriptResult, from that integer and the arguments the
	// store sent. A script may then answer its common cases with one
	// integer, which the server replies faster than an array, and the rest
	// with six. Nil: every reply is six integers.
	Decode func(v int64, a *ScriptArgs) ScriptResult
}

// NewScript returns a Script with its Hash computed, reading args (all ten
// fields of ScriptArgs, in their order, when none are given).
func NewScript(name, source string, args ...ScriptArg) *Script {
	if len(args) == 0 {
		args = AllScriptArgs
	}
	sum := sha1.Sum([]byte(source))
	return &Script{Name: name, Source: source, Hash: hex.EncodeToString(sum[:]), Args: args}
}

// CheckArgs reports arguments that s's reply cannot be read with: a script
// with a Decode derives the decision from Burst, Interval and MaxDelay,
// which must then be what a valid Policy gives (Burst and Interval at least
// 1, MaxDelay not negative). A store calls it before sending, so that such
// a call changes nothing and fails with an error saying why.
func (s *Script) CheckArgs(a *ScriptArgs) error {
	if s.Decode != nil && (a.Burst < 1 || a.Interval < 1 || a.MaxDelay < 0) {
		return fmt.Errorf("sluice/store: script %s: Burst %d, Interval %d, MaxDelay %d: its reply is read with Burst and Interval of at least 1 and MaxDelay of at least 0 (core.NewScriptArgs gives them)", s.Name, a.Burst, a.Interval, a.MaxDelay)
	}
	return nil
}

// Script operations (ScriptArgs.Op).
const (
	OpTake    = 0 // admit N units (or acquire lease Lease)
	OpRelease = 1 // release lease Lease (concurrency)
)

// ScriptArgs is the one calling convention every script follows: the
// fields a script may read. A store passes those the script declares
// (Script.Args, less the defaults it may leave out: Script.ArgsFor), in the
// order declared, as ARGV, with KEYS[1] the key:
//
//	Now        µs since the epoch; 0 means "read the server's TIME"
//	N          cost
//	Limit      Policy.Limit
//	Window     Policy.WindowMicros()
//	Burst      Policy.Capacity()
//	Interval   Policy.IntervalMicros()
//	MaxDelay   Policy.MaxDelayMicros()
//	LeaseTTL   Policy.LeaseTTLMicros()
//	Lease      lease id as a decimal string (uint64: too wide for a Lua number)
//	Op         OpTake or OpRelease
//
// Every script replies six integers: allowed (0 or 1), limit, remaining,
// retry after µs, reset after µs, delay µs (see ScriptResult); or, when it
// has a Decode, possibly one integer that Decode expands.
type ScriptArgs struct {
	Now, N, Limit, Window, Burst, Interval, MaxDelay, LeaseTTL int64
	Lease                                                      uint64
	Op                                                         int64
}

// ScriptArg names one field of ScriptArgs.
type ScriptArg uint8

// The fields of ScriptArgs, in the order of the struct.
const (
	ArgNow ScriptArg = iota
	ArgN
	ArgLimit
	ArgWindow
	ArgBurst
	ArgInterval
	ArgMaxDelay
	ArgLeaseTTL
	ArgLease
	ArgOp
	NumScriptArgs // how many fields ScriptArgs has
)

// AllScriptArgs is every field of ScriptArgs, in order: what a script
// built without a list reads.
var AllScriptArgs = []ScriptArg{ArgNow, ArgN, ArgLimit, ArgWindow, ArgBurst, ArgInterval, ArgMaxDelay, ArgLeaseTTL, ArgLease, ArgOp}

// Int64 returns field f; Lease, a uint64, is returned as its bits. It
// panics on a field out of range.
func (a *ScriptArgs) Int64(f ScriptArg) int64 {
	switch f {
	case ArgNow:
		return a.Now
	case ArgN:
		return a.N
	case ArgLimit:
		return a.Limit
	case ArgWindow:
		return a.Window
	case ArgBurst:
		return a.Burst
	case ArgInterval:
		return a.Interval
	case ArgMaxDelay:
		return a.MaxDelay
	case ArgLeaseTTL:
		return a.LeaseTTL
	case ArgLease:
		return int64(a.Lease)
	case ArgOp:
		return a.Op
	}
	panic("sluice/store: ScriptArg " + strconv.Itoa(int(f)) + " out of range")
}

// ArgsFor returns the fields one call of s with arguments a sends, in
// order: Args, less those of the last Optional that hold their default
// (see Script.Optional), taken off from the end.
func (s *Script) ArgsFor(a *ScriptArgs) []ScriptArg {
	args := s.Args
	for k := 0; k < s.Optional && len(args) > 0; k++ {
		if !a.isDefault(args[len(args)-1]) {
			break
		}
		args = args[:len(args)-1]
	}
	return args
}

// isDefault reports whether field f of a holds the value a script reads
// when f is left out: ArgNow 0, ArgN 1. No other field has a default.
func (a *ScriptArgs) isDefault(f ScriptArg) bool {
	switch f {
	case ArgNow:
		return a.Now == 0
	case ArgN:
		return a.N == 1
	}
	return false
}

// AppendArgv appends the ARGV of one call of s, in decimal, to dst: the
// fields ArgsFor names.
func (s *Script) AppendArgv(dst []string, a *ScriptArgs) []string {
	for _, f := range s.ArgsFor(a) {
		if f == ArgLease {
			dst = append(dst, strconv.FormatUint(a.Lease, 10))
			continue
		}
		dst = append(dst, strconv.FormatInt(a.Int64(f), 10))
	}
	return dst
}

// ScriptResult is a script's reply: six integers.
type ScriptResult [6]int64

// ErrReplyShape is what Result wraps for a reply of neither six integers
// nor, for a script with a Decode, one.
var ErrReplyShape = errors.New("sluice/store: script reply is not six integers")

// Result reads a reply of s to a call with arguments a: six integers, or
// one that s.Decode expands.
func (s *Script) Result(v []int64, a *ScriptArgs) (ScriptResult, error) {
	var r ScriptResult
	switch {
	case len(v) == len(r):
		copy(r[:], v)
		return r, nil
	case len(v) == 1 && s.Decode != nil:
		return s.Decode(v[0], a), nil
	}
	return r, fmt.Errorf("%w: got %d", ErrReplyShape, len(v))
}

// ScriptRunner is the optional fast path: a store that can run an
// algorithm's Lua twin on the server in one round trip. The store must never
// re-send a script whose outcome is unknown (a reply lost after the script
// was sent): it returns an error matching ErrOutcomeUnknown instead. A
// missing script (NOSCRIPT after a restart, failover or SCRIPT FLUSH) is the
// store's to recover, never the caller's to see.
type ScriptRunner interface {
	RunScript(ctx context.Context, s *Script, key Key, args ScriptArgs) (ScriptResult, error)
}
