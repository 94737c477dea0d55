//go:build unix && !linux

package verify

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// processArgs returns the command line of pid, as ps prints it, or ""
// if there is no such process.
func processArgs(t *testing.T, pid int) string {
	t.Helper()
	out, _ := exec.Command("ps", "-o", "args=", "-p", strconv.Itoa(pid)).Output()
	return strings.TrimSpace(string(out))
}

// processExits polls up to within for pid to be gone. Without a pidfd
// there is nothing to wait on; the processes checked here are orphans,
// which init reaps, so a zombie does not linger.
func processExits(t *testing.T, pid int, within time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
