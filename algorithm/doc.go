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
package algorithm
