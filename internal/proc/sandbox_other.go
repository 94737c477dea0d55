//go:build !linux

package proc

import (
	"context"
	"os"
	"os/exec"
	"runtime"
)

// Probe says what confinement works here: none beyond the reduced
// environment, outside Linux.
func Probe() Status {
	return disable(Status{Missing: []string{"no sandbox on " + runtime.GOOS}}, os.Getenv(disableEnv))
}

// sandboxed runs the command unconfined: this OS has no sandbox taskloom
// knows how to use. Probe says so, and the CLI reports it.
func sandboxed(ctx context.Context, c Cmd, env []string) (*exec.Cmd, error) {
	return command(ctx, Cmd{Args: c.Args, Env: env})
}
