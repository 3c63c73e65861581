package faults

import (
	"context"
	"testing"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// quiet drops go-redis's log lines: the faults make it log each failed dial.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain fails the run if any goroutine a test started (a client's pool,
// a store's background check, a round trip abandoned at its deadline)
// outlives the tests. One is toxiproxy's own, not Sluice's: a link torn
// down while a toxic is added or removed can leave its noop stage blocked
// on a channel nobody reads (toxiproxy v2.5.0, link.go).
func TestMain(m *testing.M) {
	goredis.SetLogger(quiet{})
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"))
}
