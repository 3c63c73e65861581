package memory

import "time"

// Sweep deletes every expired key now and returns how many it deleted. It
// locks one shard at a time, never all of them. The background sweeper calls
// it every Options.SweepInterval; call it directly when the sweeper is off.
// After Close it deletes nothing.
func (s *Store) Sweep() int {
	now := s.now()
	removed := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if !sh.closed {
			removed += sh.sweep(now)
		}
		sh.mu.Unlock()
	}
	return removed
}

func (s *Store) sweeper(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}
