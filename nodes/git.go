package nodes

import (
	"context"
	"fmt"
	"strings"

	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/worktree"
)

// gitOutput runs git in dir, the top of a worktree, and returns its
// standard output.
func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	res, err := proc.Run(ctx, proc.Cmd{Args: append([]string{"git"}, args...), Dir: dir, Env: worktree.GitEnvAt(dir)})
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("git %s: exit status %d: %s", strings.Join(args, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return res.Stdout, nil
}

// WorktreeDiff reports a worktree's changes: its head commit, which moves
// when the worker commits, then the status and the diff of what is not
// committed, so that a file edited again changes the report. The Ralph
// loop uses it to detect iterations that change nothing.
func WorktreeDiff(ctx context.Context, dir string) (string, error) {
	head, err := gitOutput(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	status, err := gitOutput(ctx, dir, "status", "--porcelain", "--untracked-files=all")
	if err != nil {
		return "", err
	}
	diff, err := gitOutput(ctx, dir, "diff", "HEAD")
	if err != nil {
		return "", err
	}
	untracked, err := gitOutput(ctx, dir, "ls-files", "--others", "--exclude-standard", "-z")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(status)
	b.WriteString(diff)
	for _, f := range strings.Split(untracked, "\x00") {
		if f == "" {
			continue
		}
		out, err := gitOutput(ctx, dir, "hash-object", "--", f)
		if err == nil {
			fmt.Fprintf(&b, "%s %s", f, out)
		}
	}
	return b.String(), nil
}
