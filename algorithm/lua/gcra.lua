-- GCRA: the Lua twin of algorithm.GCRA.Step. It must decide exactly as the
-- Go step does, for every input; the package's differential tests prove it
-- call by call.
--
-- Calling convention (core.ScriptArgs): KEYS[1] the key; ARGV[1] now in µs,
-- or "0" to read the server's TIME; ARGV[2] n; ARGV[5] burst (capacity);
-- ARGV[6] interval µs. Reply: {allowed, limit, remaining, retry_after_us,
-- reset_after_us, delay_us}.
--
-- State: one string, the theoretical arrival time TAT (µs) in decimal. One
-- GET, and one SET only when admitted.
--
-- Lua numbers are float64: every value here is an integer below 2^53 (now
-- is clamped below 2^52, a stored TAT is at most 2^52 + 2^46, burst ×
-- interval is at most 2^45), so + - * are exact, and every division goes
-- through idiv, which is exact.

local key = KEYS[1]
local now = clock(ARGV[1])
local n = tonumber(ARGV[2])
local burst = tonumber(ARGV[5])
local iv = tonumber(ARGV[6])

local MAXTIME = 4573968371548159  -- bkMaxNow + 2^46, the Go step's bkMaxTime

-- tat = max(TAT, now). pcall: a key of another type is not our state and
-- reads as absent, as undecodable state does in the Go step; so does a
-- string that is not a whole number in range.
local tat = now
local v = redis.pcall('GET', key)
if type(v) == 'string' then
	local s = tonumber(v)
	if s and s > now and s <= MAXTIME and s == math.floor(s) then tat = s end
end

local bt = burst * iv
if n < 1 or n > burst or tat + n * iv - bt > now then
	-- Denied: nothing is written. tat - now exceeds bt only after the clock
	-- stepped back.
	local rem = now + bt - tat
	if rem < 0 then rem = 0 else rem = idiv(rem, iv) end
	local retry = 0
	if n >= 1 and n <= burst then retry = tat + n * iv - bt - now end
	return {0, burst, rem, retry, tat - now, 0}
end

tat = tat + n * iv
-- The key lives until TAT, after which it would read as fresh anyway; PX
-- in whole ms, rounded up, formatted as integers (a Lua number could reach
-- Redis in exponent form).
redis.call('SET', key, string.format('%d', tat), 'PX', string.format('%d', idiv(tat - now + 999, 1000)))
return {1, burst, idiv(now + bt - tat, iv), 0, tat - now, 0}
