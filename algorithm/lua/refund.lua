-- Refunds: the Lua twin of the Refund methods of package algorithm (see
-- refund.go), for several limits of one identity in one script. Each
-- limit's units charged at `at` (the decision's time, as the charging
-- script reported it: the server's clock) go back, never more than the
-- key holds, never into another window than the one charged, never above
-- capacity. Every state is the one its twin writes.
--
-- KEYS[i] the key of limit i. ARGV[1] now in µs, or "0" to read the
-- server's TIME; ARGV[2] the number of limits k; ARGV[3] at; then per limit
-- the multi-limit script's eleven values (algorithm id, n, limit, window,
-- burst, interval, max delay, and for the calendar the period boundaries
-- computed around at), then the limit's mark (core.Refunder.Mark: the
-- bucket's full time, the TAT or the drain time, right after the charge).
-- Reply: the units refunded to each limit, in order.

local WIDTH = 12
local k = tonumber(ARGV[2])
local at = tonumber(ARGV[3])
if not k or k < 1 or #KEYS ~= k or #ARGV ~= 3 + k * WIDTH then
	return redis.error_reply('sluice: refund script: bad arguments')
end
local MAXEXACT = 9007199254740991
local MAXLIMIT = 1000000000 -- core.MaxLimit
local MAXTIME = 4573968371548159 -- the buckets' latest stored time

local function int(x) return string.format('%d', x) end

-- An integer state, or nil: a key of another type or a malformed string
-- reads as absent, and an absent key has nothing to give back.
local function getint(key)
	local v = redis.pcall('GET', key)
	if type(v) ~= 'string' or not string.find(v, '^%d+$') then return nil end
	local x = tonumber(v)
	if x > MAXEXACT then return nil end
	return x
end

-- A count kept as v = start + used - 1 (fixed window, calendar), in the
-- window [start, stop) that was charged.
local function counted(key, n, start, stop)
	local v = getint(key)
	if not v or v < start or v >= stop or now >= stop then return 0 end
	local used = v - start + 1
	local r = math.min(n, used)
	if used == r then
		redis.call('DEL', key)
	else
		redis.call('SET', key, int(v - r), 'KEEPTTL')
	end
	return r
end

-- Move the time t that key holds back by x, and return x in intervals,
-- rounded up.
local function moveback(key, t, x, iv)
	local r = idiv(x + iv - 1, iv)
	local t2 = t - x
	if t2 == now then
		redis.call('DEL', key)
	else
		redis.call('SET', key, int(t2), 'PX', int(idiv(t2 - now + 999, 1000)))
	end
	return r
end

-- A time that moves back by the time of the charge the key still owes
-- (timedRefund in refund.go): at most its n intervals, what lies ahead of
-- now of them where the charge left them (mark) and had they started at
-- at (a refund of an earlier charge may have moved them back, never to
-- before at), and what the key holds (the token bucket's full time,
-- GCRA's TAT).
local function timed(key, n, iv, mark)
	local t = getint(key)
	if not t or t <= now or t > MAXTIME or mark <= now then return 0 end
	local x = math.min(n * iv, mark - now, t - now, math.min(math.max(at, 0), MAXNOW) + n * iv - now)
	if x <= 0 then return 0 end
	return moveback(key, t, x, iv)
end

-- The leaky bucket's place in its queue (LeakyBucket.Refund in
-- refund.go): whole, what lies ahead of now of it, but only while no later
-- charge queued behind it (the drain within an interval of mark), since a
-- shaped queue keeps the starts it gave.
local function queued(key, n, iv, mark)
	local t = getint(key)
	if not t or t <= now or t > MAXTIME or mark <= now or t - mark >= iv then return 0 end
	local x = math.min(n * iv, mark - now, t - now)
	if x <= 0 then return 0 end
	return moveback(key, t, x, iv)
end

-- The sliding log: lower the member of instant at by up to n units, and
-- the running sums ("<cum>/<count>") of every member after it, while the
-- instant is in the trailing window. The new member goes in before the
-- old one leaves, so the set is never empty and keeps its expiry.
local function logged(key, n, window)
	local top = redis.pcall('ZRANGE', key, -1, -1, 'WITHSCORES')
	if top.err or #top ~= 2 then return 0 end
	local last = tonumber(top[2])
	local eff = math.max(now, last)
	if at <= eff - window or at > last then return 0 end
	local ms = redis.call('ZRANGEBYSCORE', key, int(at), '+inf', 'WITHSCORES')
	if #ms < 2 or tonumber(ms[2]) ~= at then return 0 end
	local function parse(m)
		local c, q = string.match(m, '^(%d+)/(%d+)$')
		if not c then return nil end
		return tonumber(c), tonumber(q)
	end
	local c, q = parse(ms[1])
	if not c or q < 1 or c < q then return 0 end
	local r = math.min(n, q)
	for j = 1, #ms, 2 do
		local cj, qj = parse(ms[j])
		if not cj then return 0 end -- not our state: leave it
	end
	for j = 1, #ms, 2 do
		local cj, qj = parse(ms[j])
		if j == 1 then qj = qj - r end
		if qj > 0 then
			redis.call('ZADD', key, ms[j + 1], int(cj - r) .. '/' .. int(qj))
		end
		redis.call('ZREM', key, ms[j])
	end
	return r
end

-- The sliding counter: the charge's units leave the current count, while
-- the window charged is the state's newest and not yet two windows past.
-- The state is decoded as the twin decodes it (sliding-counter.lua, from
-- which the decoding below is copied) and written back in the form the
-- twin writes, with the same q, keeping its expiry.
local function counter(key, n, window)
	local function muldiv(a, b, c)
		local q, r = 0, 0
		for shift = 20, 0, -10 do
			local digit = idiv(a, 2 ^ shift) % 1024
			local t = r * 1024 + digit * b
			local k = idiv(t, c)
			q = q * 1024 + k
			r = t - k * c
		end
		return q, r
	end

	-- R = floor(cbrt(1000 * window)), exactly: R^3 <= 1000 * 2^42 < 2^53.
	local big = 1000 * window
	local radix = math.floor(big ^ (1 / 3))
	while radix * radix * radix > big do radix = radix - 1 end
	while (radix + 1) * (radix + 1) * (radix + 1) <= big do radix = radix + 1 end

	-- pcall: a key of another type is not our state and reads as absent, as
	-- undecodable state does in the Go step. So does a malformed string, and a
	-- number too large for exact arithmetic: tonumber rounds monotonically, so
	-- every decimal above MAXEXACT compares above it.
	local s, prev, cur, q = -1, 0, 0, 0
	local v = redis.pcall('GET', key)
	if type(v) == 'string' then
		if string.find(v, '^%d+$') then
			local hi = tonumber(string.sub(v, 1, -4)) or 0
			local lo = tonumber(string.sub(v, -3))
			if hi <= MAXEXACT then
				local a = idiv(hi, window) * window
				local x = (hi - a) * 1000 + lo
				local c = idiv(x, radix)
				local b = idiv(c, radix)
				local x3, x2, x1 = b, c - b * radix, x - c * radix
				-- q < prev, or both 0: the step's floor of prev times a
				-- fraction below 1.
				if a <= MAXNOW and (x3 < x2 or x3 == 0) then
					s, prev, cur, q = a, x2, x1, x3
				end
			end
		else
			local a, b, c = string.match(v, '^(%d+):(%d+):(%d+)$')
			if a then
				a, b, c = tonumber(a), tonumber(b), tonumber(c)
				if a <= MAXNOW and b <= MAXLIMIT and c <= MAXLIMIT then
					s, prev, cur = idiv(a, window) * window, b, c
					q = muldiv(prev, a - s, window)
				end
			end
		end
	end

	if s < 0 or cur == 0 then return 0 end
	local charged = idiv(math.min(math.max(at, 0), MAXNOW), window) * window
	if charged ~= s or now >= s + 2 * window then return 0 end
	local r = math.min(n, cur)
	cur = cur - r
	local state
	if prev < radix and cur < radix then
		local x = (q * radix + prev) * radix + cur
		local h = idiv(x, 1000)
		state = string.format('%d%03d', s + h, x - h * 1000)
	else
		local t = s
		if prev > 0 then
			local f, rr = muldiv(q, window, prev)
			if rr > 0 then f = f + 1 end
			t = s + f
		end
		state = string.format('%d:%d:%d', t, prev, cur)
	end
	redis.call('SET', key, state, 'KEEPTTL')
	return r
end

local out = {}
for i = 1, k do
	local b = 3 + (i - 1) * WIDTH
	local id = tonumber(ARGV[b + 1])
	local n = tonumber(ARGV[b + 2])
	local window = tonumber(ARGV[b + 4])
	local iv = tonumber(ARGV[b + 6])
	local mark = tonumber(ARGV[b + 12])
	local key = KEYS[i]
	local r = 0
	if n >= 1 then
		if id == 2 then
			r = logged(key, n, window)
		elseif id == 3 then
			r = counter(key, n, window)
		elseif id == 1 then -- fixed window
			local start = idiv(math.min(math.max(at, 0), MAXNOW), window) * window
			r = counted(key, n, start, start + window)
		elseif id == 4 or id == 5 then -- token bucket, GCRA
			r = timed(key, n, iv, mark)
		elseif id == 6 then -- leaky bucket
			r = queued(key, n, iv, mark)
		elseif id == 7 then -- calendar: the period charged is [c1, c2)
			r = counted(key, n, tonumber(ARGV[b + 9]), tonumber(ARGV[b + 10]))
		end
	end
	out[i] = r
end
return out
