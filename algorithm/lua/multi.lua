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
-- call and pcall pass reads through (a GET of the limit's key is answered
-- from one MGET of every key) and record writes. Every twin reads
-- all it needs before its first write (on admission) and writes nothing on
-- a refusal, so what it decides is what it would decide for real, and the
-- recorded writes are exactly its own. Its `pexpire` is recorded as one
-- step and made later with the prelude's.

local WIDTH = 11
-- The writes the twins make (in the case they write them).
local WRITES = {SET = true, DEL = true, ZADD = true, ZREM = true, ZREMRANGEBYRANK = true,
	ZREMRANGEBYSCORE = true, PEXPIRE = true, PEXPIREAT = true, RESTORE = true, ['PEXPIRE*'] = true}

local k = tonumber(ARGV[2])
if not k or k < 1 or #KEYS ~= k or #ARGV ~= 2 + k * WIDTH then
	return redis.error_reply('sluice: multi-limit script: bad arguments')
end

-- Every key's string value, read at once: a twin's GET is answered from
-- it (MGET reads a key of another type as nil, which the twins read as
-- absent, as they read GET's WRONGTYPE error). Writes are deferred, so no
-- twin can see another's write, and each limit has a key of its own.
local pre = redis.call('MGET', unpack(KEYS))
local cur, ci -- the key of the limit being stepped, and its index

-- One stand-in for every limit: writes go to buf, marked with the limit.
local buf = {}
local function rec(real)
	return function(cmd, ...)
		if WRITES[cmd] then
			buf[#buf + 1] = {cmd, ...}
			return 1
		end
		if cmd == 'GET' and ... == cur then
			local v = pre[ci]
			if v then return v end
			return false
		end
		return real(cmd, ...)
	end
end
local proxy = {call = rec(redis.call), pcall = rec(redis.pcall)}

local out, all = {}, true
-- Each twin reads its own now: the one read here, which a twin would take
-- for "the server's TIME" if it were 0 (a clock at the epoch): -1 clamps
-- to the same 0.
local snow = now == 0 and '-1' or string.format('%d', now)
local argv = {snow, '', '', '', '', '', '', '', '0', '0', '', '', '', ''}
local ks = {''}
for i = 1, k do
	local b = 2 + (i - 1) * WIDTH
	local step = steps[tonumber(ARGV[b + 1])]
	if not step then
		return redis.error_reply('sluice: multi-limit script: unknown algorithm ' .. tostring(ARGV[b + 1]))
	end
	-- The twin's own convention (core.ScriptArgs), then the calendar's four.
	for j = 2, 7 do argv[j] = ARGV[b + j] end
	argv[8] = ARGV[b + 4]
	for j = 11, 14 do argv[j] = ARGV[b + j - 3] end
	ks[1], cur, ci = KEYS[i], KEYS[i], i
	local r = step(ks, argv, proxy)
	for j = 1, 6 do out[#out + 1] = r[j] end
	if r[1] ~= 1 then all = false end
end

if all then
	for _, c in ipairs(buf) do
		if c[1] == 'PEXPIRE*' then
			pexpire(c[2], c[3])
		else
			redis.call(unpack(c))
		end
	end
end
out[#out + 1] = now
return out
