-- Included (scripts.go) in the scripts that call idiv, after the prelude.

-- floor(a / b) for integers 0 <= a < 2^53, b >= 1. The float quotient may be
-- off by one after rounding; the products below are exact or, past 2^53,
-- rounded monotonically, so the comparisons still pick the true floor.
local function idiv(a, b)
	local q = math.floor(a / b)
	if q * b > a then
		q = q - 1
	elseif (q + 1) * b <= a then
		q = q + 1
	end
	return q
end

