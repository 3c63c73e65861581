-- Token bucket: the Lua twin of algorithm.TokenBucket.Step. It must decide
-- exactly as the Go step does, for every input; the package's differential
-- tests prove it call by call.
--
-- Calling convention (core.ScriptArgs, the fields token_bucket.go declares):
-- KEYS[1] the key; ARGV[1] now in µs, or "0" to read the server's TIME;
-- ARGV[2] n; ARGV[3] burst (capacity); ARGV[4] interval µs.
--
-- Reply: when the clock has not stepped behind the state (last <= now),
-- one integer, from which tokenBucketReply (token_bucket.go) derives the
-- whole decision with what the caller sent: r, the time until the bucket
-- is full again, as r when admitted and as -1 - r when denied. (With last
-- <= now, now - last < interval, so r determines both the tokens left and
-- last.) An integer is what the server replies fastest. Otherwise, and
-- inside the multi-limit script (FULL), the six values: {allowed, limit,
-- remaining, retry_after_us, reset_after_us, delay_us}.
--
-- State: one string of digits, tokens + 1 followed by last zero-padded to
-- 16 digits: the whole tokens left and the time (µs) up to which they are
-- counted. Two integers in one number, built and split as text (the number
-- itself exceeds 2^53): while tokens <= 920 it fits a signed 64-bit integer
-- in canonical form (the + 1 rules out a leading zero), which Redis stores
-- in 16 bytes instead of a string. last is below 2^52 + 2^46 < 10^16. One
-- GET, and one SET only when admitted.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now
-- is clamped below 2^52, burst × interval is at most 2^45), so + - * are
-- exact, and every division is a math.floor of a quotient whose terms sum
-- below 2^53, which is exact (see the prelude).

local key = KEYS[1]
local n = ARGV[2] + 0
local burst = ARGV[3] + 0
local iv = ARGV[4] + 0

local MAXTIME = 4573968371548159  -- bkMaxNow + 2^46, the Go step's bkMaxTime

-- pcall: a key of another type is not our state and reads as absent, as
-- undecodable state does in the Go step. So does a malformed string: one
-- that is not 17 or more digits. (A length and a find, not a pattern with
-- captures, which cost the server about 15% more time per call.)
local tokens, last = burst, now
local v = redis.pcall('GET', key)
if v and #v >= 17 and not string.find(v, '%D') then
	local a, b = tonumber(string.sub(v, 1, -17)) - 1, tonumber(string.sub(v, -16))
	if a >= 0 and b <= MAXTIME then
		-- More tokens than the burst: the policy shrank; the bucket is full.
		if a > burst then a = burst end
		tokens, last = a, b
	end
end

-- Refill whole tokens; a clock behind last stands still.
if now > last then
	local k = math.floor((now - last) / iv)
	-- Compare before adding, as the Go step does.
	if k >= burst - tokens then
		tokens, last = burst, now
	else
		tokens = tokens + k
		last = last + k * iv
	end
end

if n < 1 or n > burst or tokens < n then
	-- Denied: nothing is written (the refill is recomputed next time).
	local reset, retry = 0, 0
	if tokens < burst then reset = last + (burst - tokens) * iv - now end
	if not FULL and last <= now then return -1 - reset end
	if n >= 1 and n <= burst then retry = last + (n - tokens) * iv - now end
	return {0, burst, tokens, retry, reset, 0}
end

tokens = tokens - n
local reset = last + (burst - tokens) * iv - now
-- The key lives until the bucket is full again, when it would read as
-- fresh anyway; PX in whole ms, rounded up, formatted as an integer (a Lua
-- number could reach Redis in exponent form).
redis.call('SET', key, string.format('%d%016d', tokens + 1, last), 'PX', string.format('%d', math.floor((reset + 999) / 1000)))
if not FULL and last <= now then return reset end
return {1, burst, tokens, 0, reset, 0}
