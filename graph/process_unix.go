//go:build unix

package graph

import (
	"errors"
	"syscall"
)

// processExists reports whether a process with this pid runs: signal 0
// checks without sending anything. A process of another user still exists
// (EPERM).
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return !errors.Is(err, syscall.ESRCH)
}
