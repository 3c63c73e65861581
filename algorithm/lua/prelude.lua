-- The prelude every script starts with (scripts.go prepends it, so one copy
-- serves every twin): the clock, and exact integer division for the
-- scripts that divide. It is code run on every call, not a library: what a
-- script does not use costs nothing only if it is not here (each
-- `local function` is a closure made anew on every call), so the clock is
-- inline and idiv is added only to scripts that call it.
--
-- Lua numbers are float64: exact for integers below 2^53. Every algorithm
-- keeps its values there (times are clamped below 2^52), so + - * are exact.
-- A division is math.floor(a / b) where a + b < 2^53 (integers a >= 0,
-- b >= 1): with q = floor(a / b), a / b <= q + 1 - 1/b, and rounding could
-- reach q + 1 only if 1/b were within half an ulp of it, (q + 1) × 2^-53,
-- that is if b × (q + 1) >= 2^53; but b × (q + 1) <= a + b. Elsewhere it
-- goes through idiv (lua/idiv.lua).

local MAXNOW = 4503599627370495 -- 2^52 - 1: the latest instant the Go steps read

-- A global is a table lookup on every use, a local a register: the two a
-- script reads most are read once.
local ARGV, redis = ARGV, redis

-- now in µs: the argument core.ScriptArgs.Now is sent as (scripts.go
-- writes its position in for NOWARG, from the twin's argument list: 1 for
-- most; a number in the source, not a local to load), or when it is "0"
-- or left out (store.Script.Optional) the server's TIME, so that
-- instances with skewed clocks agree. A sent now is clamped to [0, MAXNOW]
-- as the Go steps clamp it; TIME is in that range until the year 2112.
-- Arguments and TIME's fields are decimal strings, turned into numbers by
-- arithmetic (x + 0), which converts exactly as tonumber does, without the
-- cost of a function call; a script reads its ARGV the same way.
local now = (ARGV[NOWARG] or 0) + 0
if now == 0 then
	local t = redis.call('TIME')
	now = t[1] * 1000000 + t[2]
elseif now < 0 then
	now = 0
elseif now > MAXNOW then
	now = MAXNOW
end
