// Package algorithm holds Sluice's seven algorithms, one file each. Each is
// a pure step over a small binary state (core.Algorithm), the specification,
// and has a Lua twin in lua/<name>.lua, embedded, that decides exactly as the
// step does inside Redis or Valkey in one round trip.
//
// Every step works in whole microseconds, in int64 arithmetic that cannot
// overflow for any policy core.Policy.Validate (and the algorithm's own
// CheckPolicy) accepts; the Lua twins stay below 2^53, where Lua's float64
// numbers are exact integers.
//
// Each step's doc comment states its exact admission bound and its memory per
// key. A step treats state it cannot decode as absent, and a clock that
// moves backwards as standing still.
//
// # Clock skew
//
// A store on the limiters' clocks (memcached, the memory store, the generic
// path of Redis and Valkey) declares the skew s it allows for
// (store.ClockSkewer), and the Limiter clamps each state before the step
// (core.Clamper, see skew.go): a stored time more than s beyond the latest
// a step at now could write is pulled back to that bound, and written back.
// An instance whose clock is off by X <= s is never clamped. One off by
// X > s can no longer hold the fleet in its future: before the clamp, one
// limiter an hour fast that admitted once left the correct instances
// refused for an hour (4 of 20 under "5 per minute", Retry-After about an
// hour). What it costs instead is at each handoff between its time line and
// the others' (a decision of one just after a write of the other): the key
// moves by X (the reader is ahead, and sees the others' writes X old) or by
// X − s (the reader is behind, and clamps them), and each type's doc states
// what that may admit. Scripts that read the server's clock have one time
// line and no clamp.
package algorithm
