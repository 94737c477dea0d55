package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/review"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/ui"
)

// uiOpts are the options of taskloom ui.
type uiOpts struct {
	RunID       string
	Repo        string
	Addr        string
	AllowRemote bool
}

// Validate checks the options.
func (o *uiOpts) Validate() error {
	if o.Repo == "" {
		o.Repo = "."
	}
	if err := ui.CheckAddr(o.Addr, o.AllowRemote); err != nil {
		return withCode(exitUsage, err)
	}
	return nil
}

func newUICmd(a *app) *cobra.Command {
	o := &uiOpts{}
	cmd := &cobra.Command{
		Use:   "ui [RUN_ID]",
		Short: "Serve a live web page of a run: its task graph, workers, attempts, usage and review",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runIDRunE(a, o, &o.RunID),
	}
	f := cmd.Flags()
	addStoreFlags(f, &o.Repo)
	f.StringVar(&o.Addr, "addr", ui.DefaultAddr, "address to listen on (HOST:PORT); loopback unless --allow-remote")
	f.BoolVar(&o.AllowRemote, "allow-remote", false, "allow a non-loopback --addr; every request then needs the printed token")
	return cmd
}

// Run serves the page until the command is stopped.
func (o *uiOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	s, err := openSession(ctx, cmd, o.Repo, "", true)
	if err != nil {
		return err
	}
	defer s.Close()
	run, err := s.FindRun(ctx, o.RunID)
	if err != nil {
		return err
	}
	// The resume command shown on the page finds the same store.
	flags := []string{"--repo", review.ShellQuote(run.Repo)}
	if s.DBURL != session.DefaultDBURL(s.Repo) {
		flags = append(flags, "--db", review.ShellQuote(config.RedactURL(s.DBURL)))
	}
	err = ui.Serve(ctx, ui.Opts{Saver: s.Saver, Store: s.Store, RunID: run.ID, Addr: o.Addr, AllowRemote: o.AllowRemote,
		ResumeFlags: flags, WorkersFunc: s.MarkWorkers, Logger: s.Logger}, func(url string) {
		fmt.Fprintf(w, "taskloom ui: run %s at %s (Ctrl-C to stop)\n", run.ID, url)
	})
	if err == nil && ctx.Err() != nil {
		// Stopped by the user, as a run or a worker is.
		fmt.Fprintln(w, "taskloom ui stopped")
		return withCode(exitInterrupted, nil)
	}
	return err
}
