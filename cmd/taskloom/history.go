package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/internal/report"
)

// historyOpts are the options of taskloom history.
type historyOpts struct {
	RunID string
	Repo  string
	JSON  bool
	// All shows every checkpoint; otherwise the newest Limit.
	All   bool
	Limit int
	// Task, Attempt and Export select the conversations to export: task
	// Task's attempt Attempt (0: its last), written under Export.
	Task    string
	Attempt int
	Export  string
}

// Validate checks the options.
func (o *historyOpts) Validate() error {
	switch {
	case o.RunID == "":
		return usageError("history needs a run ID: taskloom history RUN_ID (see taskloom runs)")
	case o.Export != "" && o.Task == "":
		return usageError("--export needs --task ID: taskloom history RUN_ID --task ID --export DIR")
	case o.Task != "" && o.Export == "":
		return usageError("--task needs --export DIR: taskloom history RUN_ID --task ID --export DIR")
	case o.Attempt < 0:
		return usageError("--attempt must be at least 1, got %d", o.Attempt)
	case o.Attempt > 0 && o.Task == "":
		return usageError("--attempt needs --task ID and --export DIR")
	case o.Limit < 1:
		return usageError("--limit must be at least 1, got %d", o.Limit)
	}
	if o.Repo == "" {
		o.Repo = "."
	}
	return nil
}

func newHistoryCmd(a *app) *cobra.Command {
	o := &historyOpts{}
	cmd := &cobra.Command{
		Use:   "history RUN_ID",
		Short: "List a run's checkpoints, or export a task attempt's agent conversations",
		Long: "List a run's checkpoints (step, node, time, summary); taskloom resume RUN_ID --from STEP forks the run from one.\n" +
			"With --task ID --export DIR, write that task's agent conversations of its last attempt (or --attempt N) to DIR.",
		Args: cobra.MaximumNArgs(1),
		RunE: runIDRunE(a, o, &o.RunID),
	}
	f := cmd.Flags()
	addStoreFlags(f, &o.Repo)
	f.BoolVar(&o.JSON, "json", false, "print the checkpoints as a JSON array")
	f.BoolVar(&o.All, "all", false, "show every checkpoint, not only the newest --limit")
	// Each shown checkpoint costs a state read.
	f.IntVar(&o.Limit, "limit", 200, "how many of the newest checkpoints to show")
	f.StringVar(&o.Task, "task", "", "the task whose conversations --export writes")
	f.IntVar(&o.Attempt, "attempt", 0, "the attempt to export, numbered as in its conversation IDs and Taskloom-Task trailers (default: the last)")
	f.StringVar(&o.Export, "export", "", "write the conversations to this folder")
	return cmd
}

// Run prints the run's checkpoints, or exports conversations.
func (o *historyOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	s, err := openSession(ctx, cmd, o.Repo, "", true)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, _, err := s.LoadRun(ctx, o.RunID); err != nil {
		return err
	}
	if o.Export != "" {
		ex, err := report.ExportConversations(ctx, s, o.RunID, o.Task, o.Attempt, o.Export)
		return writeReport(w, false, nil, err, func() error { return ex.Write(w) })
	}
	g, err := s.Graph()
	if err != nil {
		return err
	}
	limit := o.Limit
	if o.All {
		limit = 0
	}
	h, err := report.NewHistory(ctx, g, o.RunID, limit)
	h.Flags = nextFlags(cmd)
	return writeReport(w, o.JSON, h.Entries, err, func() error { return h.Write(w) })
}
