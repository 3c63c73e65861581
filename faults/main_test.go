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
// outlives the tests. Toxiproxy's own toxic stages are left out: a link
// torn down while toxics are added or removed can leave a stage blocked on
// a channel nobody reads any more (toxiproxy v2.5.0, toxics/toxic.go); no
// goroutine of Sluice's or of a client's runs under them.
func TestMain(m *testing.M) {
	goredis.SetLogger(quiet{})
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"))
}
