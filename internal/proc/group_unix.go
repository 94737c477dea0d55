//go:build unix

package proc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// KillGroup kills what is left of the process group a started command
// led: a server's children outlive the server when it is stopped through
// its own process alone (the MCP SDK signals just that one).
func KillGroup(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil && cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// setGroup makes the command lead its own process group and makes
// cancellation kill the whole group, so that children it spawned (test
// binaries, servers a test started) do not outlive a timeout. With
// dieWithUs, the command is killed when taskloom dies too.
func setGroup(cmd *exec.Cmd, dieWithUs bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if dieWithUs {
		setDeathSignal(cmd.SysProcAttr)
	}
	cmd.Cancel = func() error {
		// The negative pid names the process group.
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}
