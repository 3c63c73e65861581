-- Leaky bucket as a queue: the Lua twin of algorithm.LeakyBucket.Step. It
-- must decide exactly as the Go step does, for every input; the package's
-- differential tests prove it call by call.
--
-- Calling convention (core.ScriptArgs, the fields leaky_bucket.go declares):
-- KEYS[1] the key; ARGV[1] now in µs, or "0" to read the server's TIME;
-- ARGV[2] n; ARGV[3] burst (capacity); ARGV[4] interval µs; ARGV[5] max
-- delay µs.
--
-- Reply: one integer, from which leakyBucketReply (scripts.go) derives the
-- whole decision with what the caller sent: d = drain - now after the call,
-- as d when admitted (d >= n × interval >= 1) and as -1 - d when denied
-- (d >= 0). An integer is what the server replies fastest. Inside the
-- multi-limit script (FULL) it replies the six values itself: {allowed,
-- limit, remaining, retry_after_us, reset_after_us, delay_us}.
--
-- State: one string, drain (µs) in decimal: when the queue is empty again.
-- One GET, and one SET only when admitted.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now
-- is clamped below 2^52, a stored drain is at most 2^52 + 2^46, n × interval
-- is at most burst × interval + max delay < 2^46), so + - * are exact, and
-- every division is a math.floor of a quotient whose terms sum below 2^53,
-- which is exact (see the prelude).

local key = KEYS[1]
local n = ARGV[2] + 0
local burst = ARGV[3] + 0
local iv = ARGV[4] + 0
local maxdelay = ARGV[5] + 0

local MAXTIME = 4573968371548159  -- bkMaxNow + 2^46, the Go step's bkMaxTime

-- base = max(drain, now). pcall: a key of another type is not our state and
-- reads as absent, as undecodable state does in the Go step; so does a
-- string that is not a whole number in range.
local base = now
local v = redis.pcall('GET', key)
if type(v) == 'string' then
	local s = tonumber(v)
	if s and s > now and s <= MAXTIME and s % 1 == 0 then base = s end
end

local bt = burst * iv
local quota = burst + math.floor(maxdelay / iv)
-- M mod T: the queue is back to its full quota once drain - now is at most
-- this (see lbReport in the Go step).
local slack = maxdelay - math.floor(maxdelay / iv) * iv

-- Remaining and ResetAfter for a queue that drains at d (d >= now), for
-- the six values of the multi-limit script only: a closure costs a call.
local report
if FULL then
	report = function(d)
		local rem = now + maxdelay + bt - d
		if rem < 0 then rem = 0 else rem = math.floor(rem / iv) end
		local reset = d - now - slack
		if reset < 0 then reset = 0 end
		return rem, reset
	end
end

if n < 1 or n > quota then
	-- A cost the Limiter never sends: denied, without a retry time.
	if not FULL then return -1 - (base - now) end
	local rem, reset = report(base)
	return {0, quota, rem, 0, reset, 0}
end

local drain = base + n * iv
local delay = drain - bt - now
if delay < 0 then delay = 0 end
if delay > maxdelay then
	-- Denied: nothing is written. At now + (delay - maxdelay) the same
	-- request waits exactly maxdelay.
	if not FULL then return -1 - (base - now) end
	local rem, reset = report(base)
	return {0, quota, rem, delay - maxdelay, reset, 0}
end

-- The key lives until the queue drains, after which it would read as fresh
-- anyway; PX in whole ms, rounded up, formatted as integers (a Lua number
-- could reach Redis in exponent form).
redis.call('SET', key, string.format('%d', drain), 'PX', string.format('%d', math.floor((drain - now + 999) / 1000)))
if not FULL then return drain - now end
local rem, reset = report(drain)
return {1, quota, rem, 0, reset, delay}
