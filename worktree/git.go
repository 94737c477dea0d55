package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
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
}

// baseEnv is the environment every git command runs with: the process's,
// without the variables that would point git at another repository, plus
// a fixed identity so that commits work on machines without one.
func baseEnv(name, email string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
			"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_PREFIX",
			"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
			"GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_EDITOR=:",
		"GIT_AUTHOR_NAME="+name, "GIT_AUTHOR_EMAIL="+email,
		"GIT_COMMITTER_NAME="+name, "GIT_COMMITTER_EMAIL="+email,
	)
}

// run runs git and returns its stdout.
func (m *Manager) run(ctx context.Context, c gitCmd) (string, error) {
	cmd := exec.CommandContext(ctx, "git", c.args...)
	cmd.Dir = c.dir
	cmd.Env = append(m.env[:len(m.env):len(m.env)], c.env...)
	cmd.WaitDelay = 5 * time.Second
	if c.stdin != "" {
		cmd.Stdin = strings.NewReader(c.stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(c.args, " "), ctxErr)
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.String(), &gitError{args: c.args, code: ee.ExitCode(), stderr: stderr.String()}
		}
		return "", fmt.Errorf("run git: %w", err)
	}
	return stdout.String(), nil
}

// git runs git in dir and returns its stdout without the trailing newline.
func (m *Manager) git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := m.run(ctx, gitCmd{dir: dir, args: args})
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
