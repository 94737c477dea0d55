package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/internal/session"
)

func newWorkerCmd(a *app) *cobra.Command {
	var repo string
	var concurrency int
	cmd := &cobra.Command{
		Use:   "worker --db postgres://…",
		Short: "Take task attempts from the runs' queue and run them in this clone",
		Long: "Take task attempts from the queue in the runs' PostgreSQL database until stopped.\n" +
			"Run it in a clone of the repo on any machine: each attempt's base commit is fetched\n" +
			"from worker.remote (default origin), and its result pushed back there. Keys come\n" +
			"from this process's environment.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if concurrency < 1 {
				return usageError("--concurrency must be at least 1")
			}
			// Checked before anything is opened: a worker never makes a
			// store of its own.
			cfg, err := session.LoadConfig(cmd.Flags(), repo, "")
			if err != nil {
				return err
			}
			if !session.IsPostgresURL(cfg.Database.URL) {
				return session.ErrWorkerNeedsPostgres
			}
			if err := session.CheckWorkerClone(cmd.Context(), repo, cfg.Worker.Remote); err != nil {
				return err
			}
			s, err := session.Open(cmd.Context(), session.Opts{Repo: repo, Flags: cmd.Flags(), Existing: true, AwaitStore: true, Stderr: cmd.ErrOrStderr()})
			if errors.Is(err, context.Canceled) {
				fmt.Fprintln(a.stdout, "taskloom worker stopped before it took any attempt")
				return withCode(exitInterrupted, nil)
			}
			if err != nil {
				return err
			}
			defer func() { _ = s.Close() }()
			err = s.Work(cmd.Context(), session.WorkOpts{Concurrency: concurrency, Out: a.stdout})
			if errors.Is(err, context.Canceled) {
				// Stopped by the user: what it held goes back to the
				// queue, for another worker or the run itself.
				fmt.Fprintln(a.stdout, "taskloom worker stopped; an attempt it held goes back to the queue")
				return withCode(exitInterrupted, nil)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.String("db", "", "the runs' database: postgres://…")
	f.StringVar(&repo, "repo", ".", "this machine's clone of the runs' repo")
	f.IntVar(&concurrency, "concurrency", 1, "attempts to run at once")
	return cmd
}
