//go:build unix

package agent

import (
	"os/exec"
	"syscall"
)

// setProcessGroup makes the command lead its own process group and makes
// cancellation kill the whole group, so that children it spawned do not
// outlive a timeout.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
