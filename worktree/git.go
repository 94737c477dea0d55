package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/taskloom/taskloom/internal/proc"
)

// gitError is a git command that failed, with what it printed on stderr.
type gitError struct {
	args   []string
	code   int
	stderr string
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", e.code)
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), msg)
}

// exitCode returns the exit status of a failed git command, or -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.code
	}
	return -1
}

// gitCmd is one git invocation.
type gitCmd struct {
	dir   string
	args  []string
	env   []string // added to the manager's environment
	stdin string
	// timeout bounds the command; 0 means only ctx does.
	timeout time.Duration
	// outlive: the command runs to its end even if ctx ends or taskloom
	// dies (see proc.Cmd.Outlive).
	outlive bool
}

// gitEnvAllow lists what taskloom's own git commands keep of the
// process's environment: what git needs to find itself, its config and its
// credentials helpers, and nothing that could point it at another
// repository or leak a secret into a hook.
var gitEnvAllow = []string{"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR", "USER",
	"XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM", "SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "GIT_SSH",
	"SYSTEMROOT", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA", "COMSPEC", "PATHEXT"}

// baseEnv is the environment every git command runs with: the process's,
// reduced to gitEnvAllow, plus a fixed identity so that commits work on
// machines without one.
func baseEnv(name, email string) []string {
	return proc.ReduceEnv(os.Environ(), gitEnvAllow,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_EDITOR=:",
		"GIT_AUTHOR_NAME="+name, "GIT_AUTHOR_EMAIL="+email,
		"GIT_COMMITTER_NAME="+name, "GIT_COMMITTER_EMAIL="+email,
	)
}

// GitEnv is the environment taskloom's own git commands run with outside
// a Manager: this process's, reduced to what git needs.
func GitEnv() []string {
	return proc.ReduceEnv(os.Environ(), gitEnvAllow, "GIT_TERMINAL_PROMPT=0", "GIT_EDITOR=:")
}

// GitEnvAt is GitEnv for a command in the worktree or repository whose top
// is dir: git may not look for a repository above dir. In a worktree whose
// .git a worker deleted, it would find the user's, which contains it.
func GitEnvAt(dir string) []string {
	top, err := filepath.Abs(dir)
	if err == nil {
		if real, err := filepath.EvalSymlinks(top); err == nil {
			top = real
		}
	}
	return append(GitEnv(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(top))
}

// run runs git and returns its stdout.
func (m *Manager) run(ctx context.Context, c gitCmd) (string, error) {
	cmd := proc.Cmd{Args: append([]string{"git"}, c.args...), Dir: c.dir, Env: append(m.env[:len(m.env):len(m.env)], c.env...), Timeout: c.timeout, Outlive: c.outlive}
	if c.stdin != "" {
		cmd.Stdin = strings.NewReader(c.stdin)
	}
	res, err := proc.Run(ctx, cmd)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(c.args, " "), ctxErr)
		}
		return "", fmt.Errorf("run git: %w", err)
	}
	if res.TimedOut {
		return "", fmt.Errorf("git %s: no answer in %s: %w", c.args[0], c.timeout, proc.ErrTimeout)
	}
	if res.ExitCode != 0 {
		return res.Stdout, &gitError{args: c.args, code: res.ExitCode, stderr: res.Stderr}
	}
	return res.Stdout, nil
}

// git runs git in dir and returns its stdout without the trailing newline.
func (m *Manager) git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := m.run(ctx, gitCmd{dir: dir, args: args})
	return strings.TrimSuffix(out, "\n"), err
}

// remoteGit is git for a command that talks to a remote, bounded by the
// manager's remote timeout.
func (m *Manager) remoteGit(ctx context.Context, args ...string) (string, error) {
	out, err := m.run(ctx, gitCmd{dir: m.root, args: args, timeout: m.remoteTimeout})
	return strings.TrimSuffix(out, "\n"), err
}

// splitZ splits NUL-terminated output, dropping empty fields.
func splitZ(s string) []string {
	var out []string
	for _, f := range strings.Split(s, "\x00") {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}
