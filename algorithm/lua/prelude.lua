-- The prelude every script starts with (scripts.go prepends it, so one copy
-- serves all seven twins): the clock and exact integer division.
--
-- Lua numbers are float64: exact for integers below 2^53. Every algorithm
-- keeps its values there (times are clamped below 2^52), so + - * are exact,
-- and every division goes through idiv.

local MAXNOW = 4503599627370495 -- 2^52 - 1: the latest instant the Go steps read

-- floor(a / b) for integers 0 <= a < 2^53, b >= 1. The float quotient may be
-- off by one after rounding; the products below are exact or, past 2^53,
-- rounded monotonically, so the comparisons still pick the true floor.
local function idiv(a, b)
	local q = math.floor(a / b)
	if q * b > a then
		q = q - 1
	elseif (q + 1) * b <= a then
		q = q + 1
	end
	return q
end

-- clock is now in µs: ARGV[1] (core.ScriptArgs.Now), or when it is "0" the
-- server's TIME, so that instances with skewed clocks agree; clamped to
-- [0, MAXNOW] as the Go steps clamp it.
local function clock(arg)
	local now = tonumber(arg)
	if now == 0 then
		local t = redis.call('TIME')
		now = tonumber(t[1]) * 1000000 + tonumber(t[2])
	end
	if now < 0 then now = 0 elseif now > MAXNOW then now = MAXNOW end
	return now
end

-- pexpire gives key an expiry of ms >= 1 milliseconds. PEXPIRE checks its
-- deadline against the clock with <= (expiry itself uses >), so when a
-- millisecond ticks between its two clock reads, a 1 ms expiry deletes the
-- key at once (about one call in 5000). Then the key is put back from a copy
-- and the expiry set again. (SET … PX has no such gap: string states use it.)
local function pexpire(key, ms)
	if ms > 1 then
		redis.call('PEXPIRE', key, string.format('%d', ms))
		return
	end
	local saved = redis.call('DUMP', key)
	for _ = 1, 5 do
		redis.call('PEXPIRE', key, 1)
		if redis.call('EXISTS', key) == 1 then return end
		redis.call('RESTORE', key, 0, saved)
	end
end

