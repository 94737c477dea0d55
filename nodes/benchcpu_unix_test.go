//go:build unix

package nodes_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time, user and system, that this process and the
// children it waited for (git, the verify command) have used so far. Unlike
// wall time, it does not count the time spent waiting for a core, so it
// compares the start of a long run with its end on a machine whose load
// changes meanwhile.
func cpuTime() time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) != nil {
			return 0
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}
