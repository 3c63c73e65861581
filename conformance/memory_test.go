package conformance

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memory"
)

// memoryHarness runs the suite against the in-process store: one store is
// the whole backend, so every NewStore returns it.
type memoryHarness struct{ s *memory.Store }

func (h memoryHarness) NewStore(testing.TB) store.Store { return h.s }

func (memoryHarness) Capabilities() Capabilities { return Capabilities{OneClock: true} }

// TestMemoryStore is the suite against store/memory: besides the reference
// stores of this package's tests, a real store the suite did not write.
func TestMemoryStore(t *testing.T) {
	Run(t, func(t *testing.T) Harness { return memoryHarness{newMem(t)} })
}

// BenchmarkMemoryStore runs the suite's benchmarks against the in-process
// store: the floor under every other store's figures.
func BenchmarkMemoryStore(b *testing.B) {
	RunBenchmarks(b, func(b *testing.B) Harness { return memoryHarness{newMem(b)} })
}

func newMem(t testing.TB) *memory.Store {
	s := memory.New(nil)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestMemoryStoreSweeping is the suite against store/memory sweeping every
// few milliseconds by the system clock, as memory.New(nil) does once a
// minute: the suite's ManualClocks must never stand behind that clock, or
// the sweeper removes states they still count, and the suite blames the
// store for its own clocks (a run longer than a minute meets the default
// sweep).
func TestMemoryStoreSweeping(t *testing.T) {
	Run(t, func(t *testing.T) Harness {
		s := memory.New(&memory.Options{SweepInterval: 5 * time.Millisecond})
		t.Cleanup(func() { _ = s.Close() })
		return memoryHarness{s}
	})
}
