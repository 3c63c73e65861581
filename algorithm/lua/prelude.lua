-- The prelude every script starts with (scripts.go prepends it, so one copy
-- serves every twin): the clock, and exact integer division for the
-- scripts that divide. It is code run on every call, not a library: what a
-- script does not use costs nothing only if it is not here (each
-- `local function` is a closure made anew on every call), so the clock is
-- inline and idiv is added only to scripts that call it.
--
-- Lua numbers are float64: exact for integers below 2^53. Every algorithm
-- keeps its values there (times are clamped below 2^52), so + - * are exact,
-- and every division goes through idiv.

local MAXNOW = 4503599627370495 -- 2^52 - 1: the latest instant the Go steps read

-- now in µs: ARGV[1] (core.ScriptArgs.Now, the first argument of every
-- script), or when it is "0" the server's TIME, so that instances with
-- skewed clocks agree; clamped to [0, MAXNOW] as the Go steps clamp it.
local now = tonumber(ARGV[1])
if now == 0 then
	local t = redis.call('TIME')
	now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
if now < 0 then now = 0 elseif now > MAXNOW then now = MAXNOW end
