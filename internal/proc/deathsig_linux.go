//go:build linux

package proc

import "syscall"

// setDeathSignal has the kernel kill the command when taskloom dies, even
// by SIGKILL: an agent left running would go on writing to a worktree that
// the resumed run reuses.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
