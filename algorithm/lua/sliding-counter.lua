-- Sliding window counter: the Lua twin of algorithm.SlidingCounter.Step. It
-- must decide exactly as the Go step does, for every input under one Window;
-- the package's differential tests prove it call by call.
--
-- Calling convention (core.ScriptArgs): KEYS[1] the key; ARGV[1] now in µs,
-- or "0" to read the server's TIME; ARGV[2] n; ARGV[3] limit; ARGV[4]
-- window µs. Reply: {allowed, limit, remaining, retry_after_us,
-- reset_after_us, delay_us}.
--
-- State: the start s (µs) of the aligned window that holds the newest
-- admission, the units admitted in the window before it (prev) and in it
-- (cur), and q = floor(prev * elapsed / window) at the newest admission,
-- elapsed µs into its window. The step keeps the newest admission time
-- itself; its decisions read no more of it than s and q: the estimate at
-- max(now, last) subtracts max(floor(prev * (now - s) / window), q), since
-- the floor grows with the time, and once the window has rolled over the
-- time is now's.
--
-- Two forms of the state, both read whatever the policy:
--   compact "<s + h><l>", one decimal integer (Redis keeps it in 16 bytes):
--     x = (q * R + prev) * R + cur, with R = floor(cbrt(1000 * window)), is
--     split as x = h * 1000 + l (l three digits); x < R^3 <= 1000 * window,
--     so h < window and s = (s + h) - (s + h) mod window. Written when prev
--     and cur are below R (q < prev then is too): R is 100 for 1 ms, 1000
--     for 1 s, 3914 for 1 min, 15326 for 1 h. The number is at most
--     (2^52 + 2^42) * 1000 < 2^63: Redis can keep it as a 64-bit integer.
--   wide "<t>:<prev>:<cur>", written when a count is R or more, with t =
--     s + ceil(q * window / prev) (or s when prev is 0): the first instant
--     of the window at which floor(prev * elapsed / window) is q, so that
--     it reads back as the same s and q. It is the previous form of the
--     state, whose t was the newest admission, and reads the same.
-- The window decodes the state: a state written under another Window (a
-- policy reconfigured under its name) reads as some counts in a window near
-- the time it was written, where the Go step, which keeps the exact time,
-- reads the counts in the windows of that time. A state written under
-- another Limit reads exactly as in the Go step.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now is
-- clamped below 2^52, a window is at most 2^42 µs, a count at most 10^9 <
-- 2^30, x below 1000 * 2^42), so + - * are exact. Products of a count and a
-- time (up to 2^72) are never formed: muldiv computes floor(a*b/c) by long
-- division instead.

local key = KEYS[1]
local n = ARGV[2] + 0
local limit = ARGV[3] + 0
local window = ARGV[4] + 0

local MAXLIMIT = 1000000000     -- core.MaxLimit
local MAXEXACT = 9007199254740991 -- 2^53 - 1

-- floor(a * b / c) and the remainder, for integers 0 <= a < 2^30,
-- 0 <= b <= 2^42, 1 <= c <= 2^42, when the quotient is below 2^53.
-- Schoolbook long division of a*b by c, a fed in three 10-bit digits: the
-- running remainder r < c, so r*1024 + digit*b < 2^52 + 2^52 = 2^53 stays
-- exact.
local function muldiv(a, b, c)
	local q, r = 0, 0
	for shift = 20, 0, -10 do
		local digit = idiv(a, 2 ^ shift) % 1024
		local t = r * 1024 + digit * b
		local k = idiv(t, c)
		q = q * 1024 + k
		r = t - k * c
	end
	return q, r
end

-- R = floor(cbrt(1000 * window)), exactly: R^3 <= 1000 * 2^42 < 2^53.
local big = 1000 * window
local radix = math.floor(big ^ (1 / 3))
while radix * radix * radix > big do radix = radix - 1 end
while (radix + 1) * (radix + 1) * (radix + 1) <= big do radix = radix + 1 end

-- pcall: a key of another type is not our state and reads as absent, as
-- undecodable state does in the Go step. So does a malformed string, and a
-- number too large for exact arithmetic: tonumber rounds monotonically, so
-- every decimal above MAXEXACT compares above it.
local s, prev, cur, q = -1, 0, 0, 0
local v = redis.pcall('GET', key)
if type(v) == 'string' then
	if string.find(v, '^%d+$') then
		local hi = tonumber(string.sub(v, 1, -4)) or 0
		local lo = tonumber(string.sub(v, -3))
		if hi <= MAXEXACT then
			local a = idiv(hi, window) * window
			local x = (hi - a) * 1000 + lo
			local c = idiv(x, radix)
			local b = idiv(c, radix)
			local x3, x2, x1 = b, c - b * radix, x - c * radix
			-- q < prev, or both 0: the step's floor of prev times a
			-- fraction below 1.
			if a <= MAXNOW and (x3 < x2 or x3 == 0) then
				s, prev, cur, q = a, x2, x1, x3
			end
		end
	else
		local a, b, c = string.match(v, '^(%d+):(%d+):(%d+)$')
		if a then
			a, b, c = tonumber(a), tonumber(b), tonumber(c)
			if a <= MAXNOW and b <= MAXLIMIT and c <= MAXLIMIT then
				s, prev, cur = idiv(a, window) * window, b, c
				q = muldiv(prev, a - s, window)
			end
		end
	end
end

-- The step's window is the one holding max(now, last): the state's while
-- now is before it ends (a clock that moved backwards stands still in it),
-- else now's. pq is floor(prev * elapsed / window) at max(now, last).
local start, pq
if s >= 0 and now < s + window then
	start, pq = s, q
	if now > s then
		local qn = muldiv(prev, now - s, window)
		if qn > pq then pq = qn end
	end
elseif s >= 0 and now < s + 2 * window then
	-- The state's window is now the previous one.
	start = s + window
	prev, cur = cur, 0
	pq = muldiv(prev, now - start, window)
else
	-- Both windows have ended.
	start, prev, cur, pq = idiv(now, window) * window, 0, 0, 0
end

-- The estimate, rounded up: cur + ceil(prev*(W-elapsed)/W)
-- = cur + prev - floor(prev*elapsed/W).
local est = cur + prev - pq

local valid = n >= 1 and n <= limit
if valid and est + n <= limit then
	cur = cur + n
	local state
	if prev < radix and cur < radix then
		local x = (pq * radix + prev) * radix + cur
		local h = idiv(x, 1000)
		state = string.format('%d%03d', start + h, x - h * 1000)
	else
		local t = start
		if prev > 0 then
			local f, r = muldiv(pq, window, prev)
			if r > 0 then f = f + 1 end
			t = start + f
		end
		state = string.format('%d:%d:%d', t, prev, cur)
	end
	-- cur > 0 weighs on the estimate until the end of the next window.
	local ttl = start + 2 * window - now
	-- PX in whole milliseconds, rounded up so the key outlives its windows.
	-- One SET ... PX writes the value with its expiry: a separate PEXPIRE
	-- of 1 ms has been seen to delete the key at once. Formatted as an
	-- integer: a server that prints Lua numbers shortest sends 10^8 as
	-- "1e+08", which PX refuses.
	redis.call('SET', key, state, 'PX', string.format('%d', idiv(ttl + 999, 1000)))
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
