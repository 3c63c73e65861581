package region

import "math/bits"

// allocate splits limit among members for the synced mode: every member
// gets its floor; what is left, limit − Σ floors, goes to the live members
// in proportion to their demand, or to their weight when no live member
// reported any demand. A member that is not live keeps its floor only.
// Shares are rounded down, so they never add up to more than limit; the
// units lost to rounding (fewer than the number of members) go to nobody.
//
// Every argument has one entry per member; floors add up to at most limit
// (New checks), demands and weights are not negative.
func allocate(limit int64, floors, weights, demands []int64, live []bool) []int64 {
	out := make([]int64, len(floors))
	pool := limit
	for i, f := range floors {
		out[i] = f
		pool -= f
	}
	var total int64
	for i, d := range demands {
		if live[i] {
			total += d
		}
	}
	by := demands
	if total == 0 {
		by = weights
		for i, w := range weights {
			if live[i] {
				total += w
			}
		}
	}
	if total == 0 || pool <= 0 {
		return out
	}
	for i, x := range by {
		if live[i] && x > 0 {
			out[i] += mulDiv(pool, x, total)
		}
	}
	return out
}

// mulDiv is ⌊a·b/c⌋ for a, b >= 0 and 0 <= b <= c, c > 0, exact in 128 bits
// (demand totals may be large).
func mulDiv(a, b, c int64) int64 {
	if b >= c {
		return a
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c)) // hi < c, since a·b < a·c
	return int64(q)
}

// staticShares splits limit by weights, rounding down: ⌊limit·wᵢ/Σw⌋.
func staticShares(limit int64, weights []int64) []int64 {
	var total int64
	for _, w := range weights {
		total += w
	}
	out := make([]int64, len(weights))
	for i, w := range weights {
		out[i] = mulDiv(limit, w, total)
	}
	return out
}
