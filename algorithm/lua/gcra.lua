-- GCRA: the Lua twin of algorithm.GCRA.Step, and of TokenBucket.Step, whose
-- state, the bucket's full time, is the same number as GCRA's TAT (see
-- token_bucket.go). It must decide exactly as the Go step does, for every
-- input; the package's differential tests prove it call by call.
--
-- Calling convention (core.ScriptArgs, the fields scripts.go declares for
-- it): KEYS[1] the key; ARGV[1] burst (capacity); ARGV[2] interval µs;
-- ARGV[3] n, 1 when left out; ARGV[4] now in µs (the prelude reads it), the
-- server's TIME when "0" or left out. The two with a default come last, so
-- that the usual call, one unit on the server's clock, sends two arguments:
-- each one is a string the server makes on every call.
--
-- Reply: one integer, from which gcraReply (gcra.go) derives the whole
-- decision with what the caller sent: d = TAT - now after the call, as d
-- when admitted (d >= n × interval >= 1) and as -1 - d when denied (d >=
-- 0). An integer is what the server replies fastest; the six values would
-- cost it an array. Inside the multi-limit script (FULL) it replies the six
-- values itself: {allowed, limit, remaining, retry_after_us,
-- reset_after_us, delay_us}.
--
-- State: one string, the theoretical arrival time TAT (µs; the token
-- bucket's full time) in decimal, which Redis stores as an integer. One
-- GET, and one SET only when admitted.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now
-- is clamped below 2^52, a stored TAT is at most 2^52 + 2^46, burst ×
-- interval is at most 2^45), so + - * are exact, and every division is a
-- math.floor of a quotient whose terms sum below 2^47, which is exact (see
-- the prelude).

local key = KEYS[1]
local burst = ARGV[1] + 0
local iv = ARGV[2] + 0
local n = (ARGV[3] or 1) + 0

-- tat = max(TAT, now). pcall: a key of another type is not our state and
-- reads as absent, as undecodable state does in the Go step (tonumber of
-- its error table is nil); so does a string that is not a whole number in
-- range (4573968371548159 is bkMaxNow + 2^46, the Go step's bkMaxTime):
-- the token bucket's two-integer state of earlier releases, 17 digits or
-- more, is above it.
local tat = now
local s = tonumber(redis.pcall('GET', key))
if s and s > now and s <= 4573968371548159 and s % 1 == 0 then tat = s end

local bt = burst * iv
-- The time first: a denial of a valid cost is then one comparison.
if tat + n * iv - bt > now or n < 1 or n > burst then
	-- Denied: nothing is written. tat - now exceeds bt only after the clock
	-- stepped back.
	if not FULL then return -1 - (tat - now) end
	local rem = now + bt - tat
	if rem < 0 then rem = 0 else rem = math.floor(rem / iv) end
	local retry = 0
	if n >= 1 and n <= burst then retry = tat + n * iv - bt - now end
	return {0, burst, rem, retry, tat - now, 0}
end

tat = tat + n * iv
-- The key lives until TAT, after which it would read as fresh anyway; PX
-- in whole ms, rounded up, formatted as integers: a Lua number can reach
-- the server in exponent form ("1e+15").
redis.call('SET', key, string.format('%d', tat), 'PX', string.format('%d', math.floor((tat - now + 999) / 1000)))
if not FULL then return tat - now end
return {1, burst, math.floor((now + bt - tat) / iv), 0, tat - now, 0}
