-- Concurrency limit: the Lua twin of algorithm.Concurrency's Acquire
-- (op "0") and Release (op "1"). Acquire must decide
-- exactly as the Go step does, for every input; the package's differential
-- tests prove it call by call.
--
-- Calling convention (core.ScriptArgs, the fields concurrency.go declares):
-- KEYS[1] the key; ARGV[1] now in µs, or "0" to read the server's TIME;
-- ARGV[2] limit; ARGV[3] lease TTL µs; ARGV[4] the lease id in decimal ("0":
-- an anonymous lease, as Step takes); ARGV[5] the operation. Reply: {allowed, limit, remaining,
-- retry_after_us, reset_after_us, delay_us}. Release replies {released (1
-- or 0), limit, 0, 0, 0, 0}; callers ignore it.
--
-- State: a sorted set, one member per lease: score the expiry (µs), member
-- the lease id as the decimal string it came as (ids reach 2^64, beyond
-- the 2^53 a Lua number holds exactly, so they are never converted). An
-- anonymous lease is "0:<expiry>:<i>", unique, and never released.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now
-- is clamped below 2^52, a lease TTL is below 2^42), so + - * are exact, and
-- every division goes through idiv, which is exact.

local key = KEYS[1]
local limit = ARGV[2] + 0
local leasettl = ARGV[3] + 0
local lease = ARGV[4]


-- ours reports whether key's sorted set could be the Go step's state: its
-- latest expiry is a number no later than MAXTIME (the Go step's
-- bkMaxTime, bkMaxNow + 2^46), as every lease this script writes is. A set
-- with a later score (written by hand or by other software: +inf, 1e19) is
-- undecodable to the Go step, which reads it as holding no lease; so does
-- the twin, and an admission replaces it. Kept, such a score would reach
-- PEXPIRE as a number past what it takes (+inf as a negative one, which
-- deletes the key and the lease just written) and the replies' waits as
-- times past what a Duration holds.
local MAXTIME = 4573968371548159
local function ours(key)
	local top = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
	return not top or top <= MAXTIME
end

-- Score bounds as strings: a Lua number could reach Redis in exponent form
-- or, concatenated, rounded to 14 digits. "(" excludes now itself: a lease
-- expiring at now is gone, as in the Go step.
local live = string.format('(%d', now)

if ARGV[5] == '1' then
	-- Release. pcall: a key of another type is not our state (Go: nothing
	-- to release). An absent or expired lease: nothing is written.
	local s = redis.pcall('ZSCORE', key, lease)
	if type(s) ~= 'string' or tonumber(s) <= now or not ours(key) then
		return {0, limit, 0, 0, 0, 0}
	end
	-- Drop the expired leases too, as the Go step does when it writes:
	-- first, while the live lease released keeps the key. An emptied set
	-- is gone, and a script may not touch a key that is not there in a
	-- slot that is migrating (a cluster moving it): nothing touches the
	-- key after the last lease goes.
	redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
	local left = redis.call('ZCARD', key) - 1
	redis.call('ZREM', key, lease)
	if left > 0 then
		-- The key lives until its last lease expires.
		local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
		pexpire(key, idiv(tonumber(last[2]) - now + 999, 1000))
	end
	return {1, limit, 0, 0, 0, 0}
end

-- Acquire. Count the live leases without writing, so that a denial writes
-- nothing. pcall: a key of another type is not our state and reads as
-- absent, as undecodable state does in the Go step; it is replaced if the
-- lease is admitted. So is a set that is not the Go step's state (ours).
local held = redis.pcall('ZCOUNT', key, live, '+inf')
local foreign = type(held) ~= 'number' or (held > 0 and not ours(key))
if foreign then held = 0 end

if held >= limit then
	-- One more fits once the (held - limit + 1)-th earliest live lease
	-- expires. (held exceeds limit only if the policy's Limit shrank.)
	local first = redis.call('ZRANGEBYSCORE', key, live, '+inf', 'WITHSCORES', 'LIMIT', held - limit, 1)
	local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
	return {0, limit, 0, tonumber(first[2]) - now, tonumber(last[2]) - now, 0}
end

-- The lease is written first, the expired ones dropped after: Redis
-- refuses a script's write for OOM (maxmemory under noeviction) only while
-- the script has written nothing, and only for commands that may grow
-- memory (ZADD; not ZREMRANGEBYSCORE or DEL), so that on a full server the
-- admission fails with OOM, having changed nothing. A key of another type
-- must go first (ZADD would fail on it), as must a set that is not ours.
if foreign then
	redis.call('DEL', key)
end
local exp = now + leasettl
if lease == '0' then
	-- An anonymous lease needs a member of its own. Names are unique per
	-- expiry and counter; NX skips one still in use (left by a lease whose
	-- neighbours were released since), so the loop ends within limit turns.
	local i = held
	while redis.call('ZADD', key, 'NX', exp, string.format('0:%d:%d', exp, i)) == 0 do
		i = i + 1
	end
	held = held + 1
else
	-- A lease already held keeps its slot and gets the new expiry; one
	-- that had expired (still in the set until the trim below) counts as
	-- new, as one that was never there.
	local was = redis.call('ZSCORE', key, lease)
	redis.call('ZADD', key, exp, lease)
	if not was or tonumber(was) <= now then
		held = held + 1
	end
end
if not foreign then
	redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
end
local last = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
-- The key lives until its last lease expires, after which it would read as
-- fresh anyway; in whole ms, rounded up.
pexpire(key, idiv(last - now + 999, 1000))
return {1, limit, limit - held, 0, last - now, 0}
