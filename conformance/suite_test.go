package conformance

import (
	"testing"
	"time"
)

// The reference store passes the whole suite, on both paths, with and
// without an Inspector. (These runs are also what shows that the suite has
// no false positives on a correct store.)

func TestReferenceStore(t *testing.T) {
	t.Parallel() // Retention waits out states of seconds
	mk := maker(plain, Capabilities{ClockSkew: time.Second}, true)
	Run(t, func(t *testing.T) Harness { return mk(t) })
}

func TestReferenceScriptStore(t *testing.T) {
	mk := maker(scripted, Capabilities{Scripts: true, ClockSkew: 5 * time.Second}, true)
	Run(t, func(t *testing.T) Harness { return mk(t) })
}

// The reference store expiring keys on the decisions' time line
// (inproc.Timed), as an in-process store may.
func TestReferenceTimedStore(t *testing.T) {
	timed := func() *refStore { s := newRefStore(); s.timed = true; return s }
	mk := makerOf(timed, plain, Capabilities{OneClock: true}, false)
	Run(t, func(t *testing.T) Harness { return mk(t) })
}
