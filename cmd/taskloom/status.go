package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/internal/report"
	"github.com/taskloom/taskloom/internal/session"
)

// statusOpts are the options of taskloom status and taskloom runs.
type statusOpts struct {
	// RunID is the run to show; empty means the latest run on Repo.
	RunID string
	repoOpts
	JSON bool
	// List lists the runs (taskloom runs) instead.
	List bool
}

func newStatusCmd(a *app) *cobra.Command {
	o := &statusOpts{}
	cmd := &cobra.Command{
		Use:   "status [RUN_ID]",
		Short: "Show a run's progress: counts by status, current tasks, milestones, escalations",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runIDRunE(a, o, &o.RunID),
	}
	addStoreFlags(cmd.Flags(), &o.Repo)
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the status as one JSON object")
	return cmd
}

func newRunsCmd(a *app) *cobra.Command {
	o := &statusOpts{List: true}
	cmd := noArgsCmd(a, o, "runs", "List the runs in the store: ID, PRODUCT.md, status, started, progress")
	addStoreFlags(cmd.Flags(), &o.Repo)
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the runs as a JSON array")
	return cmd
}

// Run prints the status of the run, or the list of runs.
func (o *statusOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	s, err := openSession(ctx, cmd, o.Repo, "", true)
	if o.List && errors.Is(err, session.ErrNoStore) {
		// No store is no runs: a list, not an error.
		if o.JSON {
			return writeJSON(w, []report.Row{})
		}
		_, err = fmt.Fprintln(w, err)
		return err
	}
	if err != nil {
		return err
	}
	defer s.Close()
	if o.List {
		rows, err := report.Runs(ctx, s)
		return writeReport(w, o.JSON, rows, err, func() error { return report.WriteRuns(w, rows, s.DBURL) })
	}
	rep, err := report.RunStatus(ctx, s, o.RunID)
	rep.NextFlags = nextFlags(cmd)
	return writeReport(w, o.JSON, rep, err, func() error { return rep.Write(w) })
}

// writeReport prints a report that could be made: as JSON, or as text.
func writeReport(w io.Writer, asJSON bool, v any, err error, text func() error) error {
	switch {
	case err != nil:
		return err
	case asJSON:
		return writeJSON(w, v)
	}
	return text()
}
