-- Fixed window: the Lua twin of algorithm.FixedWindow.Step. It must decide
-- exactly as the Go step does, for every input under one Window; the
-- package's differential tests prove it call by call.
--
-- Calling convention (core.ScriptArgs): KEYS[1] the key; ARGV[1] now in µs,
-- or "0" to read the server's TIME; ARGV[2] n; ARGV[3] limit; ARGV[4]
-- window µs.
--
-- Reply: when the count and the time left in the window fit one exact
-- number (p = count × (window + 1) + (stop - now) < 2^53, as for most
-- policies) and the clock is in the state's window (stop - now <= window:
-- not after a step back), one integer, from which fixedWindowReply (scripts.go) derives
-- the whole decision with what the caller sent: p when admitted and -1 - p
-- when denied. An integer is what the server replies fastest. Otherwise,
-- and inside the multi-limit script (FULL), the six values: {allowed,
-- limit, remaining, retry_after_us, reset_after_us, delay_us}.
--
-- State: one integer v = start + count - 1: the start (µs) of the aligned
-- window that holds the newest admission, and the units admitted in it.
-- Redis keeps a decimal integer in 16 bytes, where "<last>:<count>" took up
-- to 48. The step keeps the newest admission time itself, but only its
-- window matters: max(now, last) and max(now, start) lie in the same aligned
-- window, since start <= last < start + window; everything else is measured
-- from now. 1 <= count <= limit <= window (core.Policy.Validate), so the
-- count fits below the next window's start and start = v - v mod window.
-- The window decodes the state: a state written under another Window (a
-- policy reconfigured under its name) reads as some count in a window near
-- the time it was written, where the Go step, which keeps the exact time,
-- reads the count in the window of that time. A state written under another
-- Limit reads exactly as in the Go step. The previous form of the state,
-- "<last>:<count>", is still read.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now is
-- clamped below 2^52, a window is at most 2^42 µs), so + - * are exact, and
-- every division is a math.floor of a quotient whose terms sum below 2^53,
-- which is exact (see the prelude).

local key = KEYS[1]
local n = ARGV[2] + 0
local limit = ARGV[3] + 0
local window = ARGV[4] + 0

local MAXLIMIT = 1000000000     -- core.MaxLimit
local MAXEXACT = 9007199254740991 -- 2^53 - 1

-- pcall: a key of another type is not our state and reads as absent, as
-- undecodable state does in the Go step. So does a malformed string, and a
-- number too large for exact arithmetic: tonumber rounds monotonically, so
-- every decimal above MAXEXACT compares above it. (A number x with x +
-- window >= 2^53 starts a window past MAXNOW anyway: the first test keeps
-- the division exact without changing what reads as absent.)
local start, used = -1, 0
local v = redis.pcall('GET', key)
if type(v) == 'string' then
	if string.find(v, '^%d+$') then
		local x = tonumber(v)
		if x <= MAXEXACT and x + window < 9007199254740992 then
			local s = math.floor(x / window) * window
			if s <= MAXNOW then start, used = s, x - s + 1 end
		end
	else
		local a, b = string.match(v, '^(%d+):(%d+)$')
		if a then
			a, b = tonumber(a), tonumber(b)
			if a <= MAXNOW and b <= MAXLIMIT then start, used = math.floor(a / window) * window, b end
		end
	end
end

-- The step's window is the one holding max(now, last). When now is before
-- the state's window ends, that is the state's window (a clock that moved
-- backwards stands still in it); after, the key reads as fresh.
if start < 0 or now >= start + window then
	start, used = math.floor(now / window) * window, 0
end
local stop = start + window

local valid = n >= 1 and n <= limit
if valid and used + n <= limit then
	used = used + n
	local ttl = stop - now
	-- PX in whole milliseconds, rounded up so the key outlives its window.
	-- One SET ... PX writes the value with its expiry: a separate PEXPIRE
	-- of 1 ms has been seen to delete the key at once. Both formatted as
	-- integers: a server that prints Lua numbers shortest sends 10^8 as
	-- "1e+08", which PX refuses.
	redis.call('SET', key, string.format('%d', start + used - 1), 'PX', string.format('%d', math.floor((ttl + 999) / 1000)))
	if not FULL and ttl <= window then
		local p = used * (window + 1) + ttl
		if p < 9007199254740992 then return p end
	end
	return {1, limit, limit - used, 0, ttl, 0}
end

-- Denied: nothing is written.
if not FULL and stop - now <= window then
	local p = used * (window + 1) + stop - now
	if p < 9007199254740992 then return -1 - p end
end
local remaining = limit - used
if remaining < 0 then remaining = 0 end
local reset = 0
if used > 0 then reset = stop - now end
local retry = 0
if valid then retry = stop - now end
return {0, limit, remaining, retry, reset, 0}
