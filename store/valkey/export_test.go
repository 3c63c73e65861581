package valkey

import "time"

// SetEvictionCheckEvery sets how often stores built from now on check the
// eviction policy, and returns a func that restores it.
func SetEvictionCheckEvery(d time.Duration) (restore func()) {
	old := evictionCheckEvery
	evictionCheckEvery = d
	return func() { evictionCheckEvery = old }
}

// BatchFrom is how many commands in flight make a standalone store's next
// command join a batch.
func BatchFrom() int { return int(batchFrom(directLanes())) }

// Batches is how many batches s has sent.
func Batches(s *Store) int64 {
	if s.direct == nil {
		return 0
	}
	return s.direct.b.b.Batches()
}

// IdleLanes is how many dedicated connections s holds idle.
func IdleLanes(s *Store) int {
	if s.direct == nil || s.direct.free == nil {
		return 0
	}
	return len(s.direct.free)
}

// PipesUp is how many of its pipelined connections s has up, and of how
// many.
func PipesUp(s *Store) (up, of int) {
	if s.sh == nil {
		return 0, 0
	}
	for i := range s.sh.pipes {
		if s.sh.pipes[i].Load() != nil {
			up++
		}
	}
	return up, len(s.sh.pipes)
}

// LanesSettled reports whether s holds every dedicated connection it may,
// idle, and makes no more: no connection is being dialled.
func LanesSettled(s *Store) bool {
	if s.direct == nil || s.direct.free == nil {
		return true
	}
	return len(s.direct.free) == int(s.direct.lanes) && !s.direct.making.Load()
}
