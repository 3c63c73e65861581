// Package stat holds the arithmetic the bench module's figures share.
package stat

import "slices"

// Median is the median of v (the mean of the two middle values when v has
// an even length), or 0 for an empty v. v is not changed.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
