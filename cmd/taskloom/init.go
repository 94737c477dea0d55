package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/worktree"
)

// initOpts are the options of taskloom init.
type initOpts struct {
	Repo string
}

func newInitCmd(a *app) *cobra.Command {
	o := &initOpts{}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write .project-config.json with the defaults and keep .taskloom/ out of git",
		Args:  cobra.NoArgs,
		RunE:  optsRunE(a, o),
	}
	cmd.Flags().StringVar(&o.Repo, "repo", ".", "the git repo to set up")
	return cmd
}

// Validate implements the command options contract.
func (o *initOpts) Validate() error {
	if o.Repo == "" {
		o.Repo = "."
	}
	return nil
}

// Run writes the config file, refusing to overwrite one.
func (o *initOpts) Run(ctx context.Context, _ *cobra.Command, w io.Writer) error {
	dir, err := filepath.Abs(o.Repo)
	if err != nil {
		return err
	}
	root, err := worktree.FindRoot(ctx, dir)
	if err != nil {
		if errors.Is(err, worktree.ErrNotRepo) {
			return fmt.Errorf("%s is not inside a git repository: run git init first, or pass --repo", dir)
		}
		return err
	}
	path := filepath.Join(root, config.FileName)
	data, err := json.MarshalIndent(config.Default(), "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s exists already; edit it, or delete it to start over", path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := worktree.ExcludeTaskloom(ctx, root); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s (the defaults; see taskloom config)\n", path)
	fmt.Fprintf(w, "added .taskloom/ to the repo's exclude file\n")
	fmt.Fprintf(w, "next: taskloom doctor, then taskloom run PRODUCT.md\n")
	return nil
}
