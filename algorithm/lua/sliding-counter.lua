-- Sliding window counter: the Lua twin of algorithm.SlidingCounter.Step. It
-- must decide exactly as the Go step does, for every input; the package's
-- differential tests prove it call by call.
--
-- Calling convention (core.ScriptArgs): KEYS[1] the key; ARGV[1] now in µs,
-- or "0" to read the server's TIME; ARGV[2] n; ARGV[3] limit; ARGV[4]
-- window µs. Reply: {allowed, limit, remaining, retry_after_us,
-- reset_after_us, delay_us}.
--
-- State: one string "<last>:<prev>:<cur>": the newest admission time (µs),
-- the units admitted in the aligned window before the one holding it, and
-- in the one holding it.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now is
-- clamped below 2^52, a window is at most 2^42 µs, a count at most 10^9 <
-- 2^30), so + - * are exact. Products of a count and a time (up to 2^72) are
-- never formed: muldiv computes floor(a*b/c) by long division instead.

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

-- floor(a * b / c) for integers 0 <= a < 2^30, 0 <= b <= 2^42, 1 <= c <= 2^42,
-- when the quotient is below 2^53. Schoolbook long division of a*b by c, a
-- fed in three 10-bit digits: the running remainder r < c, so
-- r*1024 + digit*b < 2^52 + 2^52 = 2^53 stays exact.
local function muldiv(a, b, c)
	local q, r = 0, 0
	for shift = 20, 0, -10 do
		local digit = idiv(a, 2 ^ shift) % 1024
		local t = r * 1024 + digit * b
		local k = idiv(t, c)
		q = q * 1024 + k
		r = t - k * c
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
local last, prev, cur = -1, 0, 0
local v = redis.pcall('GET', key)
if type(v) == 'string' then
	local a, b, c = string.match(v, '^(%d+):(%d+):(%d+)$')
	if a then
		a, b, c = tonumber(a), tonumber(b), tonumber(c)
		if a <= MAXNOW and b <= MAXLIMIT and c <= MAXLIMIT then last, prev, cur = a, b, c end
	end
end

-- A clock that moved backwards stands still at the newest admission.
local eff = now
if last > eff then eff = last end
local start = idiv(eff, window) * window
if last >= 0 then
	local lastStart = idiv(last, window) * window
	if lastStart == start then
		-- same window: prev and cur stand
	elseif lastStart == start - window then
		prev, cur = cur, 0 -- the state's window is now the previous one
	else
		prev, cur = 0, 0 -- both windows have ended
	end
end

-- The estimate, rounded up: cur + ceil(prev*(W-elapsed)/W)
-- = cur + prev - floor(prev*elapsed/W).
local est = cur + prev - muldiv(prev, eff - start, window)

local valid = n >= 1 and n <= limit
if valid and est + n <= limit then
	cur = cur + n
	-- cur > 0 weighs on the estimate until the end of the next window.
	local ttl = start + 2 * window - now
	-- PX in whole milliseconds, rounded up so the key outlives its windows.
	redis.call('SET', key, string.format('%d:%d:%d', eff, prev, cur), 'PX', idiv(ttl + 999, 1000))
	return {1, limit, limit - est - n, 0, ttl, 0}
end

-- Denied: nothing is written.
local remaining = limit - est
if remaining < 0 then remaining = 0 end
local reset = 0
if cur > 0 then
	reset = start + 2 * window - now
elseif prev > 0 then
	reset = start + window - now
end
local retry = 0
if valid then
	-- The first instant n units fit: in this window once prev has decayed
	-- enough (elapsed e with ceil(prev*(W-e)/W) <= r, so e = W -
	-- floor(r*W/prev)); else in the next window, where cur becomes prev;
	-- else two windows on, where the key is fresh.
	local at = -1
	local r = limit - cur - n
	if r >= 0 and prev > r then
		local e = window - muldiv(r, window, prev)
		if e < window then at = start + e end
	end
	if at < 0 then
		r = limit - n
		if cur <= r then
			at = start + window
		else
			at = start + 2 * window - muldiv(r, window, cur)
		end
	end
	retry = at - now
end
return {0, limit, remaining, retry, reset, 0}
