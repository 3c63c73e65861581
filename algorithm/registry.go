package algorithm

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/core"
)

// All returns the seven algorithms, in the order the README's table gives
// them: fixed window, sliding log, sliding counter, token bucket, GCRA,
// leaky bucket, concurrency. Each call returns a new slice.
func All() []core.Algorithm {
	return []core.Algorithm{
		FixedWindow{}, SlidingLog{}, SlidingCounter{}, TokenBucket{}, GCRA{}, LeakyBucket{}, Concurrency{},
	}
}

// ByName returns the algorithm whose Name is name ("gcra", "token-bucket",
// ...), or an error that lists the known names.
func ByName(name string) (core.Algorithm, error) {
	var names []string
	for _, a := range All() {
		if a.Name() == name {
			return a, nil
		}
		names = append(names, a.Name())
	}
	return nil, fmt.Errorf("sluice: unknown algorithm %q (known: %s)", name, strings.Join(names, ", "))
}
