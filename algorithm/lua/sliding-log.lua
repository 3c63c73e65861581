-- Sliding log: the Lua twin of algorithm.SlidingLog.Step. It must decide
-- exactly as the Go step does, for every input; the package's differential
-- tests prove it call by call.
--
-- Calling convention (core.ScriptArgs): KEYS[1] the key; ARGV[1] now in µs,
-- or "0" to read the server's TIME; ARGV[2] n; ARGV[3] limit; ARGV[4]
-- window µs. Reply: {allowed, limit, remaining, retry_after_us,
-- reset_after_us, delay_us}.
--
-- State: a sorted set with one member per admitted unit, scored by its time
-- in µs. Members are "<µs>:<i>", i = 1, 2, ... among the units of one
-- instant, so they are unique: the units of one instant all leave the window
-- together, so the next i is always their count plus one.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now is
-- clamped below 2^52, a window is at most 2^42 µs), and Redis keeps integer
-- scores below 2^53 exactly.

local key = KEYS[1]
local now = clock(ARGV[1])
local n = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local window = tonumber(ARGV[4])


-- An integer as Redis reads it back: string.format, because Lua's own
-- number-to-string conversion switches to exponents past 14 digits.
local function int(x) return string.format('%d', x) end

-- The newest entry. pcall: a key of another type is not our state and reads
-- as absent (it is replaced on the next admission), as undecodable state
-- does in the Go step; so does a score out of range.
local absent = false
local last = -1
local top = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
if top.err then
	absent = true
elseif #top == 2 then
	last = tonumber(top[2])
	if last ~= last or last < 0 or last > MAXNOW then
		absent, last = true, -1
	end
end

-- A clock that moved backwards stands still at the newest entry.
local eff = now
if last > eff then eff = last end
-- Entries at or before cutoff have left the trailing window (eff-W, eff].
local cutoff = eff - window
local live = 0
if last > cutoff then
	live = redis.call('ZCOUNT', key, '(' .. int(cutoff), '+inf')
end

local valid = n >= 1 and n <= limit
if valid and live + n <= limit then
	if absent then redis.call('DEL', key) end
	if last >= 0 then redis.call('ZREMRANGEBYSCORE', key, '-inf', int(cutoff)) end
	local at = int(eff)
	local base = 0
	if last == eff then base = redis.call('ZCOUNT', key, at, at) end
	-- ZADD in chunks: unpack of a long list overflows Lua's C stack.
	local args = {}
	for i = 1, n do
		args[#args + 1] = at
		args[#args + 1] = at .. ':' .. int(base + i)
		if #args == 1000 or i == n then
			redis.call('ZADD', key, unpack(args))
			args = {}
		end
	end
	local ttl = eff + window - now
	-- The expiry in whole milliseconds, rounded up so the key outlives its
	-- entries.
	pexpire(key, idiv(ttl + 999, 1000))
	return {1, limit, limit - live - n, 0, ttl, 0}
end

-- Denied: nothing is written.
local remaining = limit - live
if remaining < 0 then remaining = 0 end
local reset = 0
if live > 0 then reset = last + window - now end
local retry = 0
if valid then
	-- Admitting n needs m = live+n-limit entries to leave; the m-th oldest
	-- live one leaves at its time + W. Expired entries rank before the live
	-- ones, so its rank is (card - live) + m - 1.
	local m = live + n - limit
	local rank = redis.call('ZCARD', key) - live + m - 1
	local e = redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')
	retry = tonumber(e[2]) + window - now
end
return {0, limit, remaining, retry, reset, 0}
