-- Sliding log: the Lua twin of algorithm.SlidingLog.Step. It must decide
-- exactly as the Go step does, for every input; the package's differential
-- tests prove it call by call.
--
-- Calling convention (core.ScriptArgs): KEYS[1] the key; ARGV[1] now in µs,
-- or "0" to read the server's TIME; ARGV[2] n; ARGV[3] limit; ARGV[4]
-- window µs. Reply: {allowed, limit, remaining, retry_after_us,
-- reset_after_us, delay_us}.
--
-- State: a sorted set with one member per admitting instant (not per unit:
-- a decision of cost n adds one member, or grows the newest one), scored by
-- its time in µs. A member is "<cum>/<count>": count units were admitted at
-- that instant, and cum units by the key up to and including them. So the
-- units in the window are the newest cum less the cum before the oldest live
-- member (its cum less its count): two O(log k) lookups, whatever n or the
-- number of members k. Members that left the window are dropped a few per
-- admission (EXPIRED_PER_CALL), never all at once. One decision so costs
-- O(log k) commands of O(log k) (a denial's RetryAfter bisects the members),
-- plus at most EXPIRED_PER_CALL removals, and the set never holds more than
-- Limit members: each admission adds at most one and, while any member has
-- expired, drops at least one.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now is
-- clamped below 2^52, a window is at most 2^42 µs, a cum is checked below
-- 2^53), and Redis keeps integer scores below 2^53 exactly.

local EXPIRED_PER_CALL = 16
local MAXCUM = 9007199254740991 -- 2^53 - 1

local key = KEYS[1]
local n = ARGV[2] + 0
local limit = ARGV[3] + 0
local window = ARGV[4] + 0


-- An integer as Redis reads it back: string.format, because Lua's own
-- number-to-string conversion switches to exponents past 14 digits.
local function int(x) return string.format('%d', x) end

-- A member's cum and count, or nil for one this script did not write.
local function parse(m)
	local c, k = string.match(m, '^(%d+)/(%d+)$')
	if not c then return nil end
	c, k = tonumber(c), tonumber(k)
	if k < 1 or c < k or c > MAXCUM then return nil end
	return c, k
end

-- The newest member. pcall: a key of another type is not our state and reads
-- as absent (it is replaced on the next admission), as undecodable state
-- does in the Go step; so does a score out of range or a member this script
-- did not write.
local absent = false
local last, cum, count, newest = -1, 0, 0, nil
local top = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
if top.err then
	absent = true
elseif #top == 2 then
	last = tonumber(top[2])
	cum, count = parse(top[1])
	newest = top[1]
	if last ~= last or last < 0 or last > MAXNOW or not cum then
		absent, last, cum, count = true, -1, 0, 0
	end
end

-- A clock that moved backwards stands still at the newest entry.
local eff = now
if last > eff then eff = last end
-- Entries at or before cutoff have left the trailing window (eff-W, eff].
local cutoff = eff - window
-- live units in the window, base units before them; first is the rank of
-- the oldest live member (nil when none is live).
local live, base, first = 0, 0, nil
-- last is -1 for an absent key, which a cutoff below 0 (a clock within W
-- of the epoch) must not take for a live member.
if last >= 0 and last > cutoff then
	local oldest = redis.call('ZRANGEBYSCORE', key, '(' .. int(cutoff), '+inf', 'LIMIT', 0, 1)
	local c, k = parse(oldest[1])
	if c and c <= cum then
		base = c - k
		live = cum - base
		first = redis.call('ZRANK', key, oldest[1])
	else
		absent, last, cum, count = true, -1, 0, 0
		eff = now
		cutoff = eff - window
	end
end

local valid = n >= 1 and n <= limit
if valid and live + n <= limit then
	local expired = 0
	if absent then
		redis.call('DEL', key)
	else
		-- A few of the members that left the window go: the ranks below
		-- the oldest live one (every member, when none is live).
		expired = first or redis.call('ZCARD', key)
	end
	local grows = last == eff -- the newest member is this instant's: it grows by n
	if grows then
		count = count + n
	else
		count = n
	end
	-- The new member goes in first, and the ones it replaces leave after:
	-- emptied, the set would be gone, and a script may not touch a key that
	-- is not there in a slot that is migrating (a cluster moving it). It
	-- ranks above every member that left the window (its score is the
	-- newest), so their ranks stay.
	redis.call('ZADD', key, int(eff), int(cum + n) .. '/' .. int(count))
	if grows then
		redis.call('ZREM', key, newest)
	end
	if expired > 0 then
		redis.call('ZREMRANGEBYRANK', key, 0, math.min(expired, EXPIRED_PER_CALL) - 1)
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
	-- Admitting n needs m = live+n-limit units to leave; the m-th oldest live
	-- one leaves at its time + W. It is in the first member from the oldest
	-- live one whose cum reaches base + m: found by bisection over the ranks
	-- (1 <= m <= live, so a live member exists, and the newest one's cum
	-- reaches it).
	local target = base + live + n - limit
	local lo, hi = first, redis.call('ZCARD', key) - 1
	while lo < hi do
		local mid = idiv(lo + hi, 2)
		local c = parse(redis.call('ZRANGE', key, mid, mid)[1])
		if not c or c >= target then hi = mid else lo = mid + 1 end
	end
	local e = redis.call('ZRANGE', key, lo, lo, 'WITHSCORES')
	retry = tonumber(e[2]) + window - now
end
return {0, limit, remaining, retry, reset, 0}
