package algorithm

// Time bounds shared by TokenBucket, GCRA, LeakyBucket and Concurrency.
//
// These steps clamp now into [0, bkMaxNow] and accept a stored time only in
// [0, bkMaxTime]. A stored time is an instant plus at most Capacity ×
// Interval (at most 2^45 µs, by core.MaxHorizon) plus MaxDelay or LeaseTTL
// (at most core.MaxWindow, below 2^42 µs): below 2^46 µs in all. So every
// intermediate of every step, and of every Lua twin, stays below 2^53: far
// from int64 overflow in Go, and an exact integer in Lua's float64 numbers.
const (
	// bkMaxNow is 2^52 − 1 µs since the epoch, in the year 2112: the same
	// ceiling as the window algorithms' winMaxNow.
	bkMaxNow = 1<<52 - 1
	// bkMaxTime is the latest stored time a state may hold.
	bkMaxTime = bkMaxNow + 1<<46
)

// bkClamp moves now into [0, bkMaxNow]. Real clocks are far inside; the
// clamp only keeps the arithmetic exact for any int64 a caller passes.
func bkClamp(now int64) int64 {
	return min(max(now, 0), bkMaxNow)
}

// bkTimeOK reports whether a time read from state is one these steps could
// have written.
func bkTimeOK(t int64) bool {
	return t >= 0 && t <= bkMaxTime
}
