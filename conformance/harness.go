package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/store"
)

// Harness gives the suite access to the one backend under test. Run calls
// the harness maker for every algorithm on every path, with that subtest's
// t, and takes fresh clients from it there; the maker may call t.Skip or
// t.Fatal (for example when its server is not configured). RunBenchmarks
// calls its maker once per benchmark run.
type Harness interface {
	// NewStore returns a new, independent client of the backend under test,
	// with connections of its own, so that Limiters built on separate
	// NewStore results behave like separate instances of a fleet. It
	// registers the client's teardown (Close) with t.Cleanup, and calls
	// t.Fatal if it cannot connect. An in-process store has no clients: its
	// harness returns the same store every time.
	NewStore(t testing.TB) store.Store
	// Capabilities says what the store can do. The suite reads it once per
	// harness and never guesses: a store that is a store.ScriptRunner but
	// does not declare Scripts fails, and so does the converse.
	Capabilities() Capabilities
}

// Capabilities is what a Harness declares about its store. The zero value
// means: every algorithm, the generic read-modify-write path only, and
// nothing said about clocks, which the Capabilities check fails: a harness
// declares either ClockSkew or OneClock.
type Capabilities struct {
	// Algorithms are the algorithms the store is meant to run. Nil means
	// all seven of package algorithm. A store author who adds an algorithm
	// of their own lists it here, with the seven, to put it through the
	// same checks.
	Algorithms []core.Algorithm
	// Scripts declares that NewStore returns a store.ScriptRunner. The suite
	// then runs every check twice: on the script path (each decision is the
	// algorithm's Lua twin, run by the store) and, with core.Config.NoScript,
	// on the generic path (store.Store.Update). Algorithms that are not
	// core.Scripted run on the generic path only.
	Scripts bool
	// ClockSkew is the largest disagreement between the clocks of a fleet's
	// instances that the store is deployed under. It matters to stores that
	// decide by each Limiter's clock (the generic path of every store); on
	// the script path with no Clock, the server's clock decides. When
	// positive, the suite adds a check in which half of the fleet's
	// instances run ClockSkew ahead of the other half, and the count
	// admitted must not exceed the most that the algorithm's Go step admits
	// for calls at those two instants in any order. A harness that declares
	// no ClockSkew must declare OneClock instead. A store that is a
	// store.ClockSkewer must declare the same skew there (the Capabilities
	// check fails a harness that says otherwise: the Limiter clamps by what
	// the store says).
	ClockSkew time.Duration
	// OneClock declares that every instance of the store decides by one
	// clock, so that the fleet's clocks cannot disagree: an in-process
	// store, whose Limiters all read the one process's clock. The suite
	// then skips AdmissionSkewedFleet, saying so, and ClockSkew must be
	// zero. A store shared over a network is not OneClock even when each
	// decision reads the server's clock, since its generic path decides on
	// each instance's clock. FastClock runs either way.
	OneClock bool
	// Processes declares that NewStore, called in another OS process
	// running the same test, reaches the same backend: a server the test
	// is given (not an in-process store, nor one the test starts itself).
	// The suite then adds Processes, which runs the test binary again,
	// three times at once, and holds what they admit on one key to the
	// quota: the only check whose fleet is not in one process, where a
	// lock that holds only within a process would hide a race.
	Processes bool
}

// Inspector is implemented by harnesses that can look into the backend
// directly. Without it the suite proves "nothing was written" indirectly
// (a later request still meets the full quota); with it, it also checks that
// rejected input leaves no key behind, that Reset removes the key, and that
// an idle key expires when its TTL runs out.
type Inspector interface {
	// Exists reports whether the backend holds live (unexpired) state for
	// key, read through a client of its own. The key is the one the Limiter
	// passed to the store: a network store looks up key.String().
	Exists(ctx context.Context, key store.Key) (bool, error)
}
