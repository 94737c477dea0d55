// Package demo sets up the bundled textkit example as a git repo that a
// run can work on offline, and says afterwards what the run did to it.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/taskloom/taskloom/examples"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/worktree"
)

// Prepare copies the example into dir, a new git repo with one commit on
// main, and puts its scripted model session where its config reads it.
func Prepare(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	project, session, err := examples.Textkit()
	if err != nil {
		return err
	}
	if err := examples.CopyProject(project, dir); err != nil {
		return fmt.Errorf("copy the example: %w", err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=taskloom demo", "-c", "user.email=demo@taskloom.invalid", "commit", "-q", "-m", "textkit: PRODUCT.md and an empty module"},
	} {
		if _, err := git(ctx, dir, args...); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".taskloom"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ".taskloom", "demo-session.json"), session, 0o644)
}

// git runs git in dir and returns its stdout.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	res, err := proc.Run(ctx, proc.Cmd{Args: append([]string{"git", "-C", dir}, args...), Env: worktree.GitEnv()})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit status %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	if err != nil {
		return "", fmt.Errorf("git %s: %w", args[0], err)
	}
	return res.Stdout, nil
}

// Report prints main's history and the example's tests on main.
func Report(ctx context.Context, dir string, w io.Writer) error {
	log, err := git(ctx, dir, "log", "--format=  %h %s%n    %(trailers:key=Taskloom-Task,valueonly,separator=)", "main")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "commits on main (newest first, with their Taskloom-Task trailer):\n%s", strings.ReplaceAll(log, "\n    \n", "\n"))
	test, err := proc.Run(ctx, proc.Cmd{Args: []string{"go", "test", "./..."}, Dir: dir,
		Env: proc.ReduceEnv(os.Environ(), proc.DefaultEnvAllow)})
	if err != nil {
		return fmt.Errorf("go test on main: %w", err)
	}
	fmt.Fprintf(w, "go test ./... on main:\n%s", indent(test.Output))
	if test.ExitCode != 0 {
		return fmt.Errorf("the example's tests fail on main: exit status %d", test.ExitCode)
	}
	return nil
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}
