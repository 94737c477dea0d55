package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/internal/demo"
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
	cmd := noArgsCmd(a, o, "demo", "Run the bundled example end to end, offline, with 2 parallel workers")
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
	if err := demo.Prepare(ctx, dir); err != nil {
		return err
	}
	if !o.JSON {
		fmt.Fprintf(w, "taskloom demo: the textkit example in %s\n", dir)
		fmt.Fprintf(w, "plan: scripted breakdown with an auto-split; 2 parallel workers; T2 fails its tests once\n\n")
	}
	start := time.Now()
	ro := &runOpts{Product: filepath.Join(dir, "PRODUCT.md"), Repo: dir, JSON: o.JSON, Dir: dir}
	runErr := ro.Run(ctx, cmd, w)
	var ce *exitCodeError
	if o.JSON || (runErr != nil && !errors.As(runErr, &ce)) {
		return runErr
	}
	fmt.Fprintf(w, "\nwhat happened (%s):\n", time.Since(start).Round(time.Millisecond))
	if err := demo.Report(ctx, dir, w); err != nil || runErr != nil {
		return cmp.Or(err, runErr)
	}
	fmt.Fprintf(w, "\nthe repo is %s\n", dir)
	fmt.Fprintf(w, "try: cd %s && git log --stat && go test ./... && taskloom status\n", dir)
	return nil
}
