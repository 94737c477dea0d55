package agent

import (
	"context"
	"os"
	"time"

	"github.com/taskloom/taskloom/internal/proc"
)

// ConfineFunc returns how the commands run in a worktree are confined:
// their environment, their sandbox and what is redacted from their output.
type ConfineFunc func(worktree string) (proc.Confinement, error)

// defaultConfinement is used without a ConfineFunc: this process's
// environment reduced to the sandbox's default allowlist, with the values
// of everything else redacted, and no sandbox.
func defaultConfinement(string) (proc.Confinement, error) {
	allow := proc.DefaultEnvAllow
	return proc.Confinement{
		Env:      proc.ReduceEnv(os.Environ(), allow),
		Redactor: proc.NewRedactor(os.Environ(), allow),
	}, nil
}

// runProcess runs argv in dir, confined as cf says, killing everything it
// started when timeout passes or ctx ends. A non-zero exit is not an
// error; only a failure to start, or ctx ending, is.
func runProcess(ctx context.Context, dir string, argv []string, cf proc.Confinement, timeout time.Duration, limit int) (proc.Result, error) {
	return proc.Run(ctx, cf.Apply(proc.Cmd{Args: argv, Dir: dir, Timeout: timeout, OutputLimit: limit}))
}
