package memory_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/memory"
)

func Example() {
	store := memory.New(nil) // defaults: 1,000,000 keys, a sweep a minute
	defer store.Close()

	limiter, err := core.New(core.Config{
		Policy:    core.PerMinute("login", 3),
		Algorithm: algorithm.GCRA{},
		Store:     store,
	})
	if err != nil {
		panic(err)
	}
	for range 4 {
		d, err := limiter.Allow(context.Background(), "203.0.113.7")
		if err != nil {
			panic(err) // the store is closed: see memory.ErrClosed
		}
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 2
	// true 1
	// true 0
	// false 0
}
