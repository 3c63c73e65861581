package valkey_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/conformance"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store/valkey"
	valkeygo "github.com/valkey-io/valkey-go"
)

// harness runs the suite on the real redis-server or the real cluster: each
// NewStore is a valkey-go client of its own, as each instance of a fleet
// has.
type harness struct {
	addrs []string
	admin valkeygo.Client // reads keys for Exists
}

func (h harness) NewStore(t testing.TB) core.Store {
	s, _ := newStore(t, h.addrs)
	return s
}

func (harness) Capabilities() conformance.Capabilities {
	return conformance.Capabilities{Scripts: true, ClockSkew: valkey.DefaultClockSkew}
}

// Exists reads the key through the harness's own client
// (conformance.Inspector).
func (h harness) Exists(ctx context.Context, key core.Key) (bool, error) {
	n, err := h.admin.Do(ctx, h.admin.B().Exists().Key(key.String()).Build()).AsInt64()
	return n == 1, err
}

var _ conformance.Inspector = harness{}

func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		conformance.Run(t, func(t *testing.T) conformance.Harness {
			addrs := b.addrs(t)
			return harness{addrs: addrs, admin: newClient(t, addrs)}
		})
	})
}

func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, func(b *testing.B) conformance.Harness {
		addrs := backends[0].addrs(b)
		return harness{addrs: addrs, admin: newClient(b, addrs)}
	})
}
