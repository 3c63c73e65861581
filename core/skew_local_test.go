package core

import (
	"testing"
	"time"
)

// skewBindStore is an in-process store that declares its clock skew, as
// the memory store does.
type skewBindStore struct{ *bindStore }

func (skewBindStore) ClockSkew() time.Duration { return 0 }

// Over an in-process store, a Limiter without a Clock of its own reads the
// process's monotonic wall clock and steps its algorithm as it is; one with
// a Clock clamps, since another Limiter's Clock may run ahead.
func TestInProcessClampsOnlyWithAClock(t *testing.T) {
	p := Policy{Name: "p", Limit: 1, Window: time.Minute}
	s := skewBindStore{&bindStore{mapStore: newMapStore()}}
	l, err := New(Config{Policy: p, Algorithm: stamp{}, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if _, clamped := l.step.(*clamped); clamped {
		t.Errorf("no Clock: the step is clamped, want the algorithm as it is")
	}
	l, err = New(Config{Policy: p, Algorithm: stamp{}, Store: s, Clock: NewManualClock(time.Unix(0, 0))})
	if err != nil {
		t.Fatal(err)
	}
	if _, clamped := l.step.(*clamped); !clamped {
		t.Errorf("with a Clock: the step is %T, want it clamped", l.step)
	}
}
