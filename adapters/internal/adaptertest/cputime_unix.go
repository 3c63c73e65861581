//go:build unix

package adaptertest

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used. On a
// shared, loaded machine it measures the work a benchmark does better than
// the wall clock, which also counts the time spent waiting for a CPU.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
