-- Several limits on one identity, decided at once: the body of the
-- multi-limit script (multi.go builds the script: the prelude, one function
-- per algorithm wrapping its twin, then this). Every limit is stepped on
-- its own key without writing; only when every limit admits are the
-- writes each step asked for made, in order. A refusal writes nothing.
--
-- KEYS[i] the key of limit i (all share the identity's hash tag: one slot).
-- ARGV[1] now in µs, or "0" to read the server's TIME (read once: every
-- limit decides at the same instant); ARGV[2] the number of limits k; then
-- per limit WIDTH values: algorithm id, n, limit, window, burst, interval,
-- max delay, then four times for the calendar (the starts of the period
-- before the client's, of the client's, of the next, and the next's end).
-- Reply: six integers per limit, as every twin replies, then now (the
-- decision's time, which a refund of its charge names).
--
-- How a step runs without writing: it gets a stand-in for `redis` whose
-- call and pcall pass reads through and record writes. Every twin reads
-- all it needs before its first write (on admission) and writes nothing on
-- a refusal, so what it decides is what it would decide for real, and the
-- recorded writes are exactly its own. Its `pexpire` is recorded as one
-- step and made later with the prelude's.

local WIDTH = 11
local WRITES = {SET = true, DEL = true, ZADD = true, ZREM = true, ZREMRANGEBYRANK = true,
	ZREMRANGEBYSCORE = true, PEXPIRE = true, PEXPIREAT = true, RESTORE = true}

local now = clock(ARGV[1])
local k = tonumber(ARGV[2])
if not k or k < 1 or #KEYS ~= k or #ARGV ~= 2 + k * WIDTH then
	return redis.error_reply('sluice: multi-limit script: bad arguments')
end

local function recorder(buf)
	local function rec(real)
		return function(cmd, ...)
			if cmd == 'PEXPIRE*' or WRITES[string.upper(cmd)] then
				buf[#buf + 1] = {cmd, ...}
				return 1
			end
			return real(cmd, ...)
		end
	end
	return {call = rec(redis.call), pcall = rec(redis.pcall)}
end

local out, bufs, all = {}, {}, true
local snow = string.format('%d', now)
for i = 1, k do
	local b = 2 + (i - 1) * WIDTH
	local step = steps[tonumber(ARGV[b + 1])]
	if not step then
		return redis.error_reply('sluice: multi-limit script: unknown algorithm ' .. tostring(ARGV[b + 1]))
	end
	local buf = {}
	-- The twin's own convention (core.ScriptArgs), then the calendar's four.
	local argv = {snow, ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6], ARGV[b + 7],
		ARGV[b + 4], '0', '0', ARGV[b + 8], ARGV[b + 9], ARGV[b + 10], ARGV[b + 11]}
	local r = step({KEYS[i]}, argv, recorder(buf))
	for j = 1, 6 do out[#out + 1] = r[j] end
	if r[1] ~= 1 then all = false end
	bufs[i] = buf
end

if all then
	for i = 1, k do
		for _, c in ipairs(bufs[i]) do
			if c[1] == 'PEXPIRE*' then
				pexpire(c[2], c[3])
			else
				redis.call(unpack(c))
			end
		end
	end
end
out[#out + 1] = now
return out
