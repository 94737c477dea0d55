package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/examples"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/worktree"
)

// demoOpts are the options of taskloom demo.
type demoOpts struct {
	Dir  string
	JSON bool
}

// Validate checks the options.
func (o *demoOpts) Validate() error {
	if o.Dir == "" {
		return nil
	}
	entries, err := os.ReadDir(o.Dir)
	if err == nil && len(entries) > 0 {
		return fmt.Errorf("demo folder %s is not empty; pass a new or empty --dir", o.Dir)
	}
	return nil
}

func newDemoCmd(a *app) *cobra.Command {
	o := &demoOpts{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the bundled example end to end, offline, with 2 parallel workers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd, a.stdout)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", "", "where to create the example repo (default: a new temporary folder)")
	cmd.Flags().String("db", "", "store URL (default: SQLite in <dir>/.taskloom/taskloom.db)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print one JSON object per event")
	return cmd
}

// Run copies the example into a new git repo and runs the pipeline there.
func (o *demoOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	dir := o.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "taskloom-demo-"); err != nil {
			return err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
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
		res, err := proc.Run(ctx, proc.Cmd{Args: append([]string{"git", "-C", dir}, args...), Env: worktree.GitEnv()})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit status %d: %s", res.ExitCode, strings.TrimSpace(res.Output))
		}
		if err != nil {
			return fmt.Errorf("git %s: %w", args[0], err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".taskloom"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ".taskloom", "demo-session.json"), session, 0o644); err != nil {
		return err
	}
	if !o.JSON {
		fmt.Fprintf(w, "taskloom demo: the textkit example in %s\n", dir)
		fmt.Fprintf(w, "plan: scripted breakdown with an auto-split; 2 parallel workers; T2 fails its tests once\n\n")
	}
	start := time.Now()
	ro := &runOpts{Product: filepath.Join(dir, "PRODUCT.md"), Repo: dir, JSON: o.JSON, Dir: dir}
	runErr := ro.Run(ctx, cmd, w)
	if o.JSON {
		return runErr
	}
	var ce *exitCodeError
	if runErr != nil && !errors.As(runErr, &ce) {
		return runErr
	}
	fmt.Fprintf(w, "\nwhat happened (%s):\n", time.Since(start).Round(time.Millisecond))
	if err := demoReport(ctx, dir, w); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	fmt.Fprintf(w, "\nthe repo is %s\n", dir)
	fmt.Fprintf(w, "try: cd %s && git log --stat && go test ./... && taskloom status\n", dir)
	return nil
}

// demoReport prints main's history and the example's tests on main.
func demoReport(ctx context.Context, dir string, w io.Writer) error {
	log, err := proc.Run(ctx, proc.Cmd{Args: []string{"git", "-C", dir, "log",
		"--format=  %h %s%n    %(trailers:key=Taskloom-Task,valueonly,separator=)", "main"}, Env: worktree.GitEnv()})
	if err == nil && log.ExitCode != 0 {
		err = fmt.Errorf("exit status %d: %s", log.ExitCode, strings.TrimSpace(log.Stderr))
	}
	if err != nil {
		return fmt.Errorf("git log: %w", err)
	}
	fmt.Fprintf(w, "commits on main (newest first, with their Taskloom-Task trailer):\n%s", strings.ReplaceAll(log.Stdout, "\n    \n", "\n"))
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
