package algorithm

import (
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// The multi-limit script (core.Multi on Redis and Valkey): one script for
// every set of limits, whatever their algorithms, so that a store loads it
// once. It holds each rate algorithm's Lua twin, unchanged, as a function
// of its own (with its own copy of the prelude, whose redis is the
// stand-in that records writes; two algorithms with one twin, the token
// bucket and GCRA, share its function), and lua/multi.lua, which steps
// every limit and writes only when all admit.

// The algorithm ids of the multi-limit script.
const (
	multiFixedWindow = iota + 1
	multiSlidingLog
	multiSlidingCounter
	multiTokenBucket
	multiGCRA
	multiLeakyBucket
	multiCalendar
)

var multiTwins = []struct {
	id   int
	file string
}{
	{multiFixedWindow, "fixed-window"}, {multiSlidingLog, "sliding-log"}, {multiSlidingCounter, "sliding-counter"},
	{multiTokenBucket, "gcra"}, {multiGCRA, "gcra"}, {multiLeakyBucket, "leaky-bucket"}, {multiCalendar, "calendar"},
}

var multiScript = buildMultiScript()

// MultiScript returns the multi-limit script.
func MultiScript() *store.Script { return multiScript }

func buildMultiScript() *store.Script {
	var b strings.Builder
	b.WriteString(prelude(nil)) // now is ARGV[1]
	b.WriteString(readLua("pexpire"))
	b.WriteString("\nlocal steps = {}\n")
	first := map[string]int{} // the id whose function holds a twin
	for _, t := range multiTwins {
		id := strconv.Itoa(t.id)
		if prev, ok := first[t.file]; ok {
			b.WriteString("\n-- " + t.file + "\nsteps[" + id + "] = steps[" + strconv.Itoa(prev) + "]\n")
			continue
		}
		first[t.file] = t.id
		b.WriteString("\n-- " + t.file + "\nsteps[" + id + "] = function(KEYS, ARGV, redis)\n")
		// multi.lua passes every field of the convention (and the
		// calendar's four after them); the twin reads those it declares,
		// in its order.
		if args := twinArgs[t.file]; args != nil {
			b.WriteString("ARGV = {")
			for i, f := range args {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("ARGV[" + strconv.Itoa(1+int(f)) + "]")
			}
			b.WriteString("}\n")
		}
		src := twinSource(t.file, true)
		// The twin's expiry is recorded, and made with the prelude's
		// pexpire (its DUMP/RESTORE guard) after every limit admitted.
		b.WriteString("\nlocal function pexpire(key, ms) redis.call('PEXPIRE*', key, ms) end\n")
		b.WriteString(src)
		b.WriteString("\nend\n")
	}
	b.WriteString(readLua("multi"))
	return store.NewScript("multi", b.String())
}

func appendRate(dst []int64, id int64, p *core.Policy, n int64) []int64 {
	return append(dst, id, n, p.Limit, p.WindowMicros(), p.Capacity(), p.IntervalMicros(), p.MaxDelayMicros(), 0, 0, 0, 0)
}

// MultiScript is the multi-limit script.
func (FixedWindow) MultiScript() *store.Script { return multiScript }

// AppendMultiArgs appends the fixed window's arguments.
func (FixedWindow) AppendMultiArgs(dst []int64, p *core.Policy, _, n int64) []int64 {
	return appendRate(dst, multiFixedWindow, p, n)
}

// MultiScript is the multi-limit script.
func (SlidingLog) MultiScript() *store.Script { return multiScript }

// AppendMultiArgs appends the sliding log's arguments.
func (SlidingLog) AppendMultiArgs(dst []int64, p *core.Policy, _, n int64) []int64 {
	return appendRate(dst, multiSlidingLog, p, n)
}

// MultiScript is the multi-limit script.
func (SlidingCounter) MultiScript() *store.Script { return multiScript }

// AppendMultiArgs appends the sliding counter's arguments.
func (SlidingCounter) AppendMultiArgs(dst []int64, p *core.Policy, _, n int64) []int64 {
	return appendRate(dst, multiSlidingCounter, p, n)
}

// MultiScript is the multi-limit script.
func (TokenBucket) MultiScript() *store.Script { return multiScript }

// AppendMultiArgs appends the token bucket's arguments.
func (TokenBucket) AppendMultiArgs(dst []int64, p *core.Policy, _, n int64) []int64 {
	return appendRate(dst, multiTokenBucket, p, n)
}

// MultiScript is the multi-limit script.
func (GCRA) MultiScript() *store.Script { return multiScript }

// AppendMultiArgs appends GCRA's arguments.
func (GCRA) AppendMultiArgs(dst []int64, p *core.Policy, _, n int64) []int64 {
	return appendRate(dst, multiGCRA, p, n)
}

// MultiScript is the multi-limit script.
func (LeakyBucket) MultiScript() *store.Script { return multiScript }

// AppendMultiArgs appends the leaky bucket's arguments.
func (LeakyBucket) AppendMultiArgs(dst []int64, p *core.Policy, _, n int64) []int64 {
	return appendRate(dst, multiLeakyBucket, p, n)
}
