package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/doctor"
	"github.com/taskloom/taskloom/worktree"
)

// initOpts are the options of taskloom init.
type initOpts struct{ repoOpts }

func newInitCmd(a *app) *cobra.Command {
	o := &initOpts{}
	cmd := noArgsCmd(a, o, "init", "Write .project-config.json with the defaults and keep .taskloom/ out of git")
	cmd.Flags().StringVar(&o.Repo, "repo", ".", "the git repo to set up")
	return cmd
}

// Run writes the config file, refusing to overwrite one.
func (o *initOpts) Run(ctx context.Context, _ *cobra.Command, w io.Writer) error {
	dir, err := filepath.Abs(o.Repo)
	if err != nil {
		return err
	}
	root, err := worktree.FindRoot(ctx, dir)
	if errors.Is(err, worktree.ErrNotRepo) {
		return fmt.Errorf("%s is not inside a git repository: run git init first, or pass --repo", dir)
	} else if err != nil {
		return err
	}
	path, proj, err := config.WriteDefault(root, func(argv []string) bool { return doctor.RunnerWorks(ctx, root, argv) })
	if err != nil {
		return err
	}
	if err := worktree.ExcludeTaskloom(ctx, root); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s (the defaults; see taskloom config)\n", path)
	if proj.Kind != "" {
		fmt.Fprintf(w, "this repo is %s: verify.command is %s\n", proj, strings.Join(proj.Verify, " "))
	} else {
		fmt.Fprintf(w, "found %s: verify.command is go test ./...; set it to the command that runs your tests\n", proj)
	}
	fmt.Fprintf(w, "added .taskloom/ to the repo's exclude file\n")
	fmt.Fprintf(w, "next: taskloom doctor, then taskloom run PRODUCT.md\n")
	return nil
}
