package store

import (
	"slices"
	"testing"
)

// A script's optional arguments are left out from the end while they hold
// their defaults (now 0, n 1), and never one before an argument sent.
func TestScriptArgsForLeavesOutTrailingDefaults(t *testing.T) {
	s := NewScript("t", "return 0", ArgBurst, ArgInterval, ArgN, ArgNow)
	s.Optional = 2
	for _, c := range []struct {
		now, n int64
		want   []string
	}{
		{0, 1, []string{"5", "100"}},
		{0, 3, []string{"5", "100", "3"}},
		{7, 1, []string{"5", "100", "1", "7"}},
		{7, 3, []string{"5", "100", "3", "7"}},
	} {
		a := ScriptArgs{Now: c.now, N: c.n, Burst: 5, Interval: 100}
		if got := s.AppendArgv(nil, &a); !slices.Equal(got, c.want) {
			t.Errorf("now %d, n %d: ARGV %q, want %q", c.now, c.n, got, c.want)
		}
		if got := s.ArgsFor(&a); len(got) != len(c.want) {
			t.Errorf("now %d, n %d: ArgsFor %v, want %d fields", c.now, c.n, got, len(c.want))
		}
	}
	// Only the last Optional: with one, n is always sent.
	s.Optional = 1
	if got := s.AppendArgv(nil, &ScriptArgs{N: 1, Burst: 5, Interval: 100}); !slices.Equal(got, []string{"5", "100", "1"}) {
		t.Errorf("Optional 1: ARGV %q, want n sent", got)
	}
	// A field without a default is never left out, nor what precedes it.
	all := NewScript("all", "return 0")
	all.Optional = 3
	if got := all.AppendArgv(nil, &ScriptArgs{N: 1}); len(got) != len(AllScriptArgs) {
		t.Errorf("a script ending in Op: %d arguments, want all %d", len(got), len(AllScriptArgs))
	}
}
