-- Included (scripts.go) in the scripts that call pexpire, after the prelude.
--
-- pexpire gives key an expiry of ms >= 1 milliseconds. PEXPIRE checks its
-- deadline against the clock with <= (expiry itself uses >), so when a
-- millisecond ticks between its two clock reads, a 1 ms expiry deletes the
-- key at once (about one call in 5000). Then the key is put back from a copy
-- and the expiry set again. (SET … PX has no such gap: string states use it.)
local function pexpire(key, ms)
	if ms > 1 then
		redis.call('PEXPIRE', key, string.format('%d', ms))
		return
	end
	local saved = redis.call('DUMP', key)
	for _ = 1, 5 do
		redis.call('PEXPIRE', key, 1)
		if redis.call('EXISTS', key) == 1 then return end
		redis.call('RESTORE', key, 0, saved)
	end
end

