-- Fixed window: the Lua twin of algorithm.FixedWindow.Step. It must decide
-- exactly as the Go step does, for every input; the package's differential
-- tests prove it call by call.
--
-- Calling convention (core.ScriptArgs): KEYS[1] the key; ARGV[1] now in µs,
-- or "0" to read the server's TIME; ARGV[2] n; ARGV[3] limit; ARGV[4]
-- window µs. Reply: {allowed, limit, remaining, retry_after_us,
-- reset_after_us, delay_us}.
--
-- State: one string "<last>:<count>": the newest admission time (µs) and the
-- units admitted in the aligned window that holds it.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now is
-- clamped below 2^52, a window is at most 2^42 µs), so + - * are exact, and
-- every division goes through idiv, which is exact.

local key = KEYS[1]
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local window = tonumber(ARGV[4])

local MAXNOW = 4503599627370495 -- 2^52 - 1, the Go step's winMaxNow
local MAXLIMIT = 1000000000     -- core.MaxLimit

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

if now == 0 then
	-- The server's clock, so that instances with skewed clocks agree.
	local t = redis.call('TIME')
	now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
if now < 0 then now = 0 elseif now > MAXNOW then now = MAXNOW end

-- pcall: a key of another type is not our state and reads as absent, as
-- undecodable state does in the Go step. So does a malformed string.
local last, used = -1, 0
local v = redis.pcall('GET', key)
if type(v) == 'string' then
	local a, b = string.match(v, '^(%d+):(%d+)$')
	if a then
		a, b = tonumber(a), tonumber(b)
		if a <= MAXNOW and b <= MAXLIMIT then last, used = a, b end
	end
end

-- A clock that moved backwards stands still at the newest admission.
local eff = now
if last > eff then eff = last end
local start = idiv(eff, window) * window
if last < 0 or idiv(last, window) * window ~= start then
	-- The state's window has ended: the key reads as fresh.
	used = 0
end
local stop = start + window

local valid = n >= 1 and n <= limit
if valid and used + n <= limit then
	used = used + n
	local ttl = stop - now
	-- PX in whole milliseconds, rounded up so the key outlives its window.
	redis.call('SET', key, string.format('%d:%d', eff, used), 'PX', idiv(ttl + 999, 1000))
	return {1, limit, limit - used, 0, ttl, 0}
end

-- Denied: nothing is written.
local remaining = limit - used
if remaining < 0 then remaining = 0 end
local reset = 0
if used > 0 then reset = stop - now end
local retry = 0
if valid then retry = stop - now end
return {0, limit, remaining, retry, reset, 0}
