// Command benchtable turns rounds of BenchmarkMatrix output into the
// README's side-by-side table: for every cell (backend, allow or deny, one
// key or many, concurrency), Sluice's median ns/op and each peer's ratio,
// peer ns/op ÷ Sluice ns/op, median over the rounds (above 1: Sluice is
// faster). It reads `go test -bench` output on standard input; rounds are
// the repeated results of one benchmark (run the matrix several times, in
// turn, so that the rounds interleave):
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench Matrix -benchmem . ; done | go run ./cmd/benchtable
//
// A ratio is the median of the per-round ratios, each round's peer against
// the same round's Sluice, so that a machine whose speed drifts between
// rounds weighs on both alike.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/bench/internal/stat"
)

// result is one benchmark line's ns/op and allocs/op.
type result struct{ ns, allocs float64 }

// cell names one row of the table: everything in the benchmark's name but
// the contender.
type cell struct{ backend, mode, keys, conc string }

func main() {
	runs, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	if len(runs) == 0 {
		fmt.Fprintln(os.Stderr, "benchtable: no BenchmarkMatrix results on standard input")
		os.Exit(1)
	}
	write(os.Stdout, runs)
}

// parse reads BenchmarkMatrix/<backend>/<mode>/<keys>/<contender>/<conc>-P
// lines: each cell's rounds per contender, in the order they came.
func parse(r io.Reader) (map[cell]map[string][]result, error) {
	runs := map[cell]map[string][]result{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkMatrix/") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		parts := strings.Split(name, "/")
		if len(parts) != 6 {
			continue
		}
		var res result
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is not a number", f[0], f[i])
			}
			switch f[i+1] {
			case "ns/op":
				res.ns = v
			case "allocs/op":
				res.allocs = v
			}
		}
		if res.ns == 0 {
			continue
		}
		c := cell{parts[1], parts[2], parts[3], parts[5]}
		if runs[c] == nil {
			runs[c] = map[string][]result{}
		}
		runs[c][parts[4]] = append(runs[c][parts[4]], res)
	}
	return runs, sc.Err()
}

// ratio is the median over rounds of peer ns/op ÷ sluice ns/op, pairing
// round i with round i.
func ratio(sluice, peer []result) float64 {
	n := min(len(sluice), len(peer))
	r := make([]float64, n)
	for i := range n {
		r[i] = peer[i].ns / sluice[i].ns
	}
	return stat.Median(r)
}

var concOrder = []string{"serial", "parallel4", "parallel16", "parallel64", "parallel256"}

func write(w io.Writer, runs map[cell]map[string][]result) {
	var cells []cell
	for c := range runs {
		cells = append(cells, c)
	}
	slices.SortFunc(cells, func(a, b cell) int {
		for _, d := range [][2]string{{a.backend, b.backend}, {a.mode, b.mode}} {
			if c := strings.Compare(d[0], d[1]); c != 0 {
				return c
			}
		}
		if a.keys != b.keys { // 1key before 100kkeys
			return len(a.keys) - len(b.keys)
		}
		return slices.Index(concOrder, a.conc) - slices.Index(concOrder, b.conc)
	})
	backend := ""
	var peers, ours []string
	worst := map[string]float64{}
	for _, c := range cells {
		if c.backend != backend {
			backend = c.backend
			peers, ours = contenders(runs, backend)
			fmt.Fprintf(w, "\n%s: peer ns/op ÷ Sluice ns/op, median of rounds (above 1: Sluice faster)\n\n", backend)
			fmt.Fprintf(w, "| cell | Sluice | ns/op | allocs/op | %s |\n|---|---|---|---|%s\n",
				strings.Join(peers, " | "), strings.Repeat("---|", len(peers)))
		}
		for _, s := range ours {
			mine := runs[c][s]
			if len(mine) == 0 {
				continue
			}
			var ns, allocs []float64
			for _, r := range mine {
				ns, allocs = append(ns, r.ns), append(allocs, r.allocs)
			}
			row := fmt.Sprintf("| %s %s %s | %s | %.0f | %.0f |", c.mode, c.keys, c.conc, s, stat.Median(ns), stat.Median(allocs))
			for _, p := range peers {
				if theirs := runs[c][p]; len(theirs) > 0 {
					r := ratio(mine, theirs)
					row += fmt.Sprintf(" %.2f |", r)
					key := backend + " " + s + " vs " + p
					if v, ok := worst[key]; !ok || r < v {
						worst[key] = r
					}
				} else {
					row += " |"
				}
			}
			fmt.Fprintln(w, row)
		}
	}
	fmt.Fprintf(w, "\nLowest ratio over every cell:\n\n")
	keys := make([]string, 0, len(worst))
	for k := range worst {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "- %s: %.2f\n", k, worst[k])
	}
}

// contenders splits a backend's contenders into the peers and Sluice's own
// (named sluice or sluice-<store>), each in first-seen order.
func contenders(runs map[cell]map[string][]result, backend string) (peers, ours []string) {
	seen := map[string]bool{}
	var cells []cell
	for c := range runs {
		if c.backend == backend {
			cells = append(cells, c)
		}
	}
	for _, c := range cells {
		for name := range runs[c] {
			if seen[name] {
				continue
			}
			seen[name] = true
			if name == "sluice" || strings.HasPrefix(name, "sluice-") {
				ours = append(ours, name)
			} else {
				peers = append(peers, name)
			}
		}
	}
	slices.Sort(peers)
	slices.Sort(ours)
	return peers, ours
}
