//go:build unix

package safefile

import (
	"os"
	"syscall"
)

// An open without O_NONBLOCK waits on a named pipe until the other end
// opens it; O_NOFOLLOW refuses a last component that became a symlink.
const (
	openFlags = syscall.O_NONBLOCK
	noFollow  = syscall.O_NOFOLLOW
)

// blocking turns O_NONBLOCK off again once the file is known to be
// regular, where it changes nothing but is not what os.File expects.
func blocking(f *os.File) error {
	return syscall.SetNonblock(int(f.Fd()), false)
}
