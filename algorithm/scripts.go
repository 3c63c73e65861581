package algorithm

import (
	"embed"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/store"
)

//go:embed lua/*.lua
var luaFS embed.FS

// twinArgs are the fields of store.ScriptArgs each twin reads, in the
// order of its ARGV: only those reach the server, which turns every
// argument into a Lua string on every call. The prelude reads now from
// the position of store.ArgNow (ARGV[1] where no list names it). A twin
// not listed reads all ten.
//
// GCRA's twin (the token bucket's too) puts last the two arguments that
// have a default (twinOptional), so that its usual call, one unit on the
// server's clock, sends the burst and the interval alone.
var twinArgs = map[string][]store.ScriptArg{
	"gcra":            {store.ArgBurst, store.ArgInterval, store.ArgN, store.ArgNow},
	"leaky-bucket":    {store.ArgNow, store.ArgN, store.ArgBurst, store.ArgInterval, store.ArgMaxDelay},
	"fixed-window":    {store.ArgNow, store.ArgN, store.ArgLimit, store.ArgWindow},
	"sliding-counter": {store.ArgNow, store.ArgN, store.ArgLimit, store.ArgWindow},
	"sliding-log":     {store.ArgNow, store.ArgN, store.ArgLimit, store.ArgWindow},
	"concurrency":     {store.ArgNow, store.ArgLimit, store.ArgLeaseTTL, store.ArgLease, store.ArgOp},
}

// twinOptional is how many of the last twinArgs a call may leave out while
// they hold their defaults (store.Script.Optional); the twin reads an
// absent one as its default.
var twinOptional = map[string]int{"gcra": 2}

// twinDecode are the decoders of the twins that may reply one integer
// (see store.Script.Decode).
var twinDecode = map[string]func(int64, *store.ScriptArgs) store.ScriptResult{
	"gcra":         gcraReply,
	"leaky-bucket": leakyBucketReply,
	"fixed-window": fixedWindowReply,
}

func readLua(name string) string {
	b, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("sluice/algorithm: missing embedded script " + name + ".lua")
	}
	return string(b)
}

// twinSource is the Lua twin lua/<name>.lua as a script: after the prelude
// (lua/prelude.lua: the clock), and the helpers it calls (lua/idiv.lua,
// lua/pexpire.lua), each only where called: every `local function` is a
// closure made on every call. full says whether the twin replies six
// values always (FULL: inside the multi-limit script) or may reply one
// integer.
func twinSource(name string, full bool) string {
	src := readLua(name)
	var b strings.Builder
	if full {
		b.WriteString("local FULL = true\n")
	} else {
		b.WriteString("local FULL = false\n")
	}
	b.WriteString(prelude(twinArgs[name]))
	if strings.Contains(src, "idiv(") {
		b.WriteString(readLua("idiv"))
	}
	if strings.Contains(src, "pexpire(") && !full {
		b.WriteString(readLua("pexpire"))
	}
	b.WriteString(src)
	return b.String()
}

// prelude is lua/prelude.lua for a script whose ARGV holds args, with the
// position it reads now from, ARGV[NOWARG], written in: that of
// store.ArgNow there (1 when args are every field, or do not name it).
func prelude(args []store.ScriptArg) string {
	at := 1
	for i, f := range args {
		if f == store.ArgNow {
			at = i + 1
		}
	}
	src := readLua("prelude")
	if !strings.Contains(src, "ARGV[NOWARG]") {
		panic("sluice/algorithm: prelude.lua reads now without ARGV[NOWARG]")
	}
	return strings.Replace(src, "ARGV[NOWARG]", "ARGV["+strconv.Itoa(at)+"]", 1)
}

// loadScript returns the embedded Lua twin lua/<name>.lua (see twinSource),
// with the arguments it reads and its decoder. It panics only if a file is
// missing from the build, which the package's tests catch.
func loadScript(name string) *store.Script { return loadTwin(name, name) }

// loadTwin is loadScript for a script named name whose twin is lua/<file>.lua
// (the token bucket's is GCRA's).
func loadTwin(name, file string) *store.Script {
	s := store.NewScript(name, twinSource(file, false), twinArgs[file]...)
	s.Optional = twinOptional[file]
	s.Decode = twinDecode[file]
	return s
}

// gcraReply expands the one-integer reply of GCRA's twin, which is also
// the token bucket's: d = TAT (the full time) - now after the call,
// admitted as d and denied as -1 - d. These are the twin's
// own formulas for the six values (lua/gcra.lua, the FULL branches), on
// the arguments it was sent.
func gcraReply(v int64, a *store.ScriptArgs) store.ScriptResult {
	n, burst, iv := a.N, a.Burst, a.Interval
	bt := burst * iv
	if v >= 0 {
		return store.ScriptResult{1, burst, (bt - v) / iv, 0, v, 0}
	}
	d := -1 - v
	rem := bt - d
	if rem < 0 {
		rem = 0
	} else {
		rem /= iv
	}
	var retry int64
	if n >= 1 && n <= burst {
		retry = d + n*iv - bt
	}
	return store.ScriptResult{0, burst, rem, retry, d, 0}
}

// leakyBucketReply expands the leaky bucket twin's one-integer reply: d =
// drain - now after the call, admitted as d and denied as -1 - d, by the
// twin's own formulas for the six values (lua/leaky-bucket.lua, the FULL
// branches).
func leakyBucketReply(v int64, a *store.ScriptArgs) store.ScriptResult {
	n, burst, iv, maxDelay := a.N, a.Burst, a.Interval, a.MaxDelay
	bt := burst * iv
	quota := burst + maxDelay/iv
	slack := maxDelay % iv
	report := func(d int64) (rem, reset int64) {
		rem = max(maxDelay+bt-d, 0) / iv
		reset = max(d-slack, 0)
		return rem, reset
	}
	if v >= 0 {
		rem, reset := report(v)
		return store.ScriptResult{1, quota, rem, 0, reset, max(v-bt, 0)}
	}
	d := -1 - v
	rem, reset := report(d)
	var retry int64
	if n >= 1 && n <= quota {
		retry = max(d+n*iv-bt, 0) - maxDelay
	}
	return store.ScriptResult{0, quota, rem, retry, reset, 0}
}

// fixedWindowReply expands the fixed window twin's one-integer reply: p =
// count × (window + 1) + (stop - now), admitted as p and denied as -1 - p,
// by the twin's own formulas for the six values (lua/fixed-window.lua).
// The twin replies so only when 0 < stop - now <= window, so the two split
// apart exactly.
func fixedWindowReply(v int64, a *store.ScriptArgs) store.ScriptResult {
	n, limit, w := a.N, a.Limit, a.Window
	allowed := int64(1)
	if v < 0 {
		allowed, v = 0, -1-v
	}
	used, ttl := v/(w+1), v%(w+1)
	if allowed == 1 {
		return store.ScriptResult{1, limit, limit - used, 0, ttl, 0}
	}
	var reset, retry int64
	if used > 0 {
		reset = ttl
	}
	if n >= 1 && n <= limit {
		retry = ttl
	}
	return store.ScriptResult{0, limit, max(limit-used, 0), retry, reset, 0}
}
