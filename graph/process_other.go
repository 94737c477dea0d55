//go:build !unix

package graph

import "os"

// processExists reports whether a process with this pid runs. On Windows
// FindProcess opens the process, which fails when there is none.
func processExists(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	_ = p.Release()
	return true
}
