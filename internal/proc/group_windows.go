package proc

import "os/exec"

// KillGroup kills the command's process: Windows has no process group
// of its own for it.
func KillGroup(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}

// setGroup leaves the default: exec kills the process when ctx ends.
func setGroup(*exec.Cmd, bool) {}
