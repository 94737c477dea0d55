package verify

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// processArgs returns the command line of pid, its arguments joined by
// spaces, or "" if there is no such process.
func processArgs(t *testing.T, pid int) string {
	t.Helper()
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Join(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), " ")
}

// processExits waits up to within for pid to exit (to be a zombie or
// gone), on a pidfd: it is woken by the exit, not by polling.
func processExits(t *testing.T, pid int, within time.Duration) bool {
	t.Helper()
	const sysPidfdOpen = 434 // the same number on every Linux architecture
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	switch {
	case errno == syscall.ESRCH:
		return true
	case errno != 0:
		t.Logf("pidfd_open: %v; checking /proc once", errno)
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		i := strings.LastIndexByte(string(b), ')')
		return i >= 0 && len(b) > i+2 && (b[i+2] == 'Z' || b[i+2] == 'X')
	}
	defer syscall.Close(int(fd))
	tv := syscall.NsecToTimeval(within.Nanoseconds())
	for {
		var set syscall.FdSet
		set.Bits[fd/64] |= 1 << (fd % 64)
		n, err := syscall.Select(int(fd)+1, &set, nil, nil, &tv) // Linux updates tv
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		require.NoError(t, err)
		return n == 1
	}
}
