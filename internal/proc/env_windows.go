package proc

import (
	"os/exec"
	"strings"
)

func envKey(name string) string { return strings.ToUpper(name) }

// lookPathIn defers to the OS's own search, which knows PATHEXT.
func lookPathIn(name, _ string) (string, error) { return exec.LookPath(name) }
