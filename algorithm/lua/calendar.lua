-- Calendar quota: the Lua twin of algorithm.Calendar.Step, run only as one
-- limit of the multi-limit script (multi.lua), which hands it the period
-- boundaries that the client computed in the quota's time zone (Lua has no
-- time zones): ARGV[11..14] = c0 < c1 < c2 < c3, the starts of the period
-- before the client's, of the client's and of the next, and the next's
-- end. The script decides at its own now (the server's TIME); a now within
-- [c0, c3) finds its period among the three, so a client clock off by less
-- than a period decides as the server's clock says.
--
-- ARGV[1] now µs; ARGV[2] n; ARGV[3] limit. Reply: {allowed, limit,
-- remaining, retry_after_us, reset_after_us, delay_us = 0}.
--
-- State: one integer v = start + count - 1 (decimal), as the fixed window
-- keeps it: the start (µs) of the period that holds the newest admission,
-- and the units admitted in it (count <= limit <= 10^9 µs, far below a
-- period). A v in a period before now's reads as fresh; a v in a later
-- period (a clock that moved backwards) keeps that period.

local key = KEYS[1]
local n = ARGV[2] + 0
local limit = ARGV[3] + 0
local c = {ARGV[11] + 0, ARGV[12] + 0, ARGV[13] + 0, ARGV[14] + 0}

local MAXEXACT = 9007199254740991 -- 2^53 - 1
local MAXLIMIT = 1000000000     -- core.MaxLimit

-- The period [start, stop) that holds t; before c0 it is the first one,
-- from c3 on one as long as the last, starting at c3.
local function period(t)
	if t < c[2] then return c[1], c[2] end
	if t < c[3] then return c[2], c[3] end
	if t < c[4] then return c[3], c[4] end
	return c[4], c[4] + (c[4] - c[3])
end

local start, stop = period(now)
local used = 0
local v = redis.pcall('GET', key)
if type(v) == 'string' and string.find(v, '^%d+$') then
	local x = tonumber(v)
	if x <= MAXEXACT and x >= c[1] then
		local s, e = period(x)
		if s >= start and x - s + 1 <= MAXLIMIT then
			-- now's period, or a later one (the clock moved backwards).
			start, stop, used = s, e, x - s + 1
		end
	end
end

local valid = n >= 1 and n <= limit
local ttl = stop - now
if ttl < 1 then ttl = 1 end
if valid and used + n <= limit then
	used = used + n
	redis.call('SET', key, string.format('%d', start + used - 1), 'PX', string.format('%d', idiv(ttl + 999, 1000)))
	return {1, limit, limit - used, 0, ttl, 0}
end

-- Denied: nothing is written. A count above limit (the limit was lowered
-- within the period) stays refused until the period ends.
local remaining = limit - used
if remaining < 0 then remaining = 0 end
local reset = 0
if used > 0 then reset = ttl end
local retry = 0
if valid then retry = ttl end
return {0, limit, remaining, retry, reset, 0}
