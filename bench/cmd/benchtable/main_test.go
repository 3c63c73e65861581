package main

import (
	"strings"
	"testing"
)

// Two rounds of one cell: the ratio is the median of per-round ratios, the
// allocations Sluice's median, and the worst cell is listed per peer.
func TestTable(t *testing.T) {
	in := `goos: linux
BenchmarkMatrix/memory/allow/1key/sluice/serial-2   	 1000	 100.0 ns/op	 10000000 decisions/s	 0 errors/op	 0 B/op	 0 allocs/op
BenchmarkMatrix/memory/allow/1key/peer/serial-2     	 1000	 150.0 ns/op	 0 B/op	 1 allocs/op
BenchmarkMatrix/memory/allow/1key/sluice/serial-2   	 1000	 200.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkMatrix/memory/allow/1key/peer/serial-2     	 1000	 100.0 ns/op	 0 B/op	 1 allocs/op
BenchmarkMatrix/memory/allow/100kkeys/sluice/parallel4-2 	 1000	 100.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkMatrix/memory/allow/100kkeys/peer/parallel4-2   	 1000	 300.0 ns/op	 0 B/op	 0 allocs/op
PASS
`
	runs, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	write(&out, runs)
	got := out.String()
	for _, want := range []string{
		"| allow 1key serial | sluice | 150 | 0 | 1.00 |", // ratios 1.5 and 0.5
		"| allow 100kkeys parallel4 | sluice | 100 | 0 | 3.00 |",
		"- memory sluice vs peer: 1.00",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Index(got, "1key serial") > strings.Index(got, "100kkeys parallel4") {
		t.Errorf("one key should come before 100k keys:\n%s", got)
	}
}

func TestParseRefusesGarbage(t *testing.T) {
	if _, err := parse(strings.NewReader("BenchmarkMatrix/a/b/c/d/e-2 10 x ns/op\n")); err == nil {
		t.Error("a value that is not a number was accepted")
	}
}
