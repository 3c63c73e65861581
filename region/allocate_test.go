package region

import (
	"math"
	"slices"
	"testing"
)

func TestAllocate(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		limit                int64
		floors, weights, dem []int64
		live                 []bool
		want                 []int64
	}{
		{"by demand", 100, []int64{10, 10, 10}, []int64{1, 1, 1}, []int64{60, 10, 0}, []bool{true, true, true}, []int64{70, 20, 10}},
		{"no demand: by weight", 100, []int64{10, 10, 10}, []int64{2, 1, 1}, []int64{0, 0, 0}, []bool{true, true, true}, []int64{45, 27, 27}},
		{"a dark region keeps its floor only", 100, []int64{10, 10, 10}, []int64{1, 1, 1}, []int64{5, 5, 90}, []bool{true, true, false}, []int64{45, 45, 10}},
		{"a dark region's demand is not counted", 100, []int64{10, 10, 10}, []int64{1, 1, 1}, []int64{0, 0, 90}, []bool{true, true, false}, []int64{45, 45, 10}},
		{"floors take it all", 30, []int64{10, 10, 10}, []int64{1, 1, 1}, []int64{5, 0, 0}, []bool{true, true, true}, []int64{10, 10, 10}},
		{"rounding down", 10, []int64{1, 1, 1}, []int64{1, 1, 1}, []int64{1, 1, 1}, []bool{true, true, true}, []int64{3, 3, 3}},
		{"huge demands", 1_000_000_000, []int64{0, 0}, []int64{1, 1}, []int64{1 << 40, 1 << 39}, []bool{true, true}, []int64{666_666_666, 333_333_333}},
	} {
		got := allocate(tc.limit, tc.floors, tc.weights, tc.dem, tc.live)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: allocate = %v, want %v", tc.name, got, tc.want)
		}
		var sum int64
		for _, x := range got {
			sum += x
		}
		if sum > tc.limit {
			t.Errorf("%s: shares add up to %d > limit %d", tc.name, sum, tc.limit)
		}
	}
}

func TestMulDiv(t *testing.T) {
	for _, tc := range []struct{ a, b, c, want int64 }{
		{100, 1, 3, 33},
		{100, 3, 3, 100},
		{1_000_000_000, 1 << 40, 3 << 39, 666_666_666},
		{1_000_000_000, math.MaxInt64 - 1, math.MaxInt64, 999_999_999},
		{0, 5, 7, 0},
	} {
		if got := mulDiv(tc.a, tc.b, tc.c); got != tc.want {
			t.Errorf("mulDiv(%d, %d, %d) = %d, want %d", tc.a, tc.b, tc.c, got, tc.want)
		}
	}
}

func TestStaticShares(t *testing.T) {
	if got, want := staticShares(100, []int64{2, 1, 1}), []int64{50, 25, 25}; !slices.Equal(got, want) {
		t.Errorf("staticShares = %v, want %v", got, want)
	}
	if got, want := staticShares(10, []int64{1, 1, 1}), []int64{3, 3, 3}; !slices.Equal(got, want) {
		t.Errorf("staticShares = %v, want %v", got, want)
	}
}
