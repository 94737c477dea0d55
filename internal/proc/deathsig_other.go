//go:build unix && !linux

package proc

import "syscall"

// setDeathSignal does nothing where the kernel cannot tie a child's life
// to its parent's: the process group is still killed on a timeout.
func setDeathSignal(*syscall.SysProcAttr) {}
