package faults

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// quiet drops go-redis's log lines: the faults make it log each failed dial.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain fails the run if any goroutine a test started (a client's pool,
// a store's background check, a round trip abandoned at its deadline)
// outlives the tests, allowing 3 s for the last ones to end: go-redis's
// background dialer notices a closed pool within a second. Toxiproxy's own
// toxic stages, and a link's reader that feeds them, are left out: a link
// torn down while toxics are added or removed can leave a stage, or the
// reader sending to the first stage, blocked on a channel nobody reads any
// more (toxiproxy v2.5.0, toxics/toxic.go and link.go); no goroutine of
// Sluice's or of a client's runs under them.
func TestMain(m *testing.M) {
	goredis.SetLogger(quiet{})
	code := m.Run()
	if code == 0 {
		ignore := []goleak.Option{
			goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
			goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		}
		err := goleak.Find(ignore...)
		for deadline := time.Now().Add(3 * time.Second); err != nil && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			err = goleak.Find(ignore...)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines outlived the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
