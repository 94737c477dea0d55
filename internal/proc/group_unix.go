//go:build unix

package proc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

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
