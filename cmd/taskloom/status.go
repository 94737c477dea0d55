package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

// statusOpts are the options of taskloom status.
type statusOpts struct {
	// RunID is the run to show; empty means the latest run on Repo.
	RunID      string
	Repo       string
	ConfigFile string
	JSON       bool
}

// Validate checks the options.
func (o *statusOpts) Validate() error {
	if o.Repo == "" {
		o.Repo = "."
	}
	return nil
}

func newStatusCmd(a *app) *cobra.Command {
	o := &statusOpts{}
	cmd := &cobra.Command{
		Use:   "status [RUN_ID]",
		Short: "Show a run's progress: counts by status, current tasks, milestones, escalations",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runIDRunE(a, o, &o.RunID),
	}
	f := cmd.Flags()
	addStoreFlags(f, &o.Repo)
	f.BoolVar(&o.JSON, "json", false, "print the status as one JSON object")
	return cmd
}

// statusReport is the object status --json prints.
type statusReport struct {
	RunID          string               `json:"run_id"`
	Status         string               `json:"status"`
	TargetBranch   string               `json:"target_branch"`
	Tasks          scheduler.Summary    `json:"tasks"`
	CurrentTaskIDs []string             `json:"current_task_ids"`
	Workers        []nodes.WorkerStatus `json:"workers"`
	Escalations    []nodes.Escalation   `json:"escalations"`
	// NoChange lists the completed tasks whose attempt changed nothing.
	NoChange []string `json:"no_change"`
	// Usage is what the run's model calls used so far.
	Usage nodes.UsageReport `json:"usage"`
	run   nodes.Run         // the registry entry
	head  graph.Result[nodes.State]
}

// Run prints the status of the run.
func (o *statusOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	s, err := openReadSession(ctx, cmd, o.Repo, o.ConfigFile)
	if err != nil {
		return err
	}
	defer s.Close()
	run, err := s.findRun(ctx, o.RunID)
	if err != nil {
		return err
	}
	g, err := s.graph()
	if err != nil {
		return err
	}
	head, _, err := headState(ctx, g, run.ID)
	if err != nil {
		return err
	}
	rep := buildStatus(run, head)
	if o.JSON {
		return writeJSON(w, rep)
	}
	printStatus(w, rep)
	return nil
}

// findRun returns run id, or the latest run on the session's repo when id
// is empty.
func (s *session) findRun(ctx context.Context, id string) (nodes.Run, error) {
	if id != "" {
		run, _, err := s.loadRun(ctx, id)
		return run, err
	}
	run, err := s.store.LatestRun(ctx, s.repo)
	if errors.Is(err, nodes.ErrRunNotFound) {
		return run, fmt.Errorf("no runs of repo %s in %s; start one with taskloom run PRODUCT.md, or pass --repo or --db", s.repo, checkpoint.MaskURL(s.dbURL))
	}
	return run, err
}

// headState returns a run's newest state; ok is false when the run has no
// checkpoint yet (it stopped before its first step), and the result is
// then empty.
func headState(ctx context.Context, g *graph.Runnable[nodes.State], runID string) (graph.Result[nodes.State], bool, error) {
	res, err := g.State(ctx, runID, -1)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return graph.Result[nodes.State]{Step: -1}, false, nil
	}
	var decode *checkpoint.DecodeError
	if errors.As(err, &decode) {
		return res, false, decodeFault(decode)
	}
	if err != nil {
		return res, false, fmt.Errorf("read the state of run %s: %w", runID, err)
	}
	return res, true, nil
}

// buildStatus derives a run's status report from its registry entry and
// its newest state.
func buildStatus(run nodes.Run, head graph.Result[nodes.State]) statusReport {
	st := head.State
	tasks := st.Tasks.Values()
	rep := statusReport{
		RunID:          run.ID,
		Status:         run.Status,
		Tasks:          scheduler.Summarize(tasks),
		CurrentTaskIDs: currentTaskIDs(st),
		Workers:        nodes.Workers(head),
		Escalations:    []nodes.Escalation{},
		NoChange:       append([]string{}, nodes.NoChangeTasks(st)...),
		run:            run,
		head:           head,
	}
	var meta runMeta
	_ = json.Unmarshal(run.Meta, &meta)
	rep.TargetBranch = st.Branch.Get()
	if rep.TargetBranch == "" {
		rep.TargetBranch = meta.TargetBranch
	}
	rep.Usage = nodes.NewUsageReport(nodes.RunUsage(st), meta.Model)
	// The pending interrupts are the escalations a human must still answer;
	// without them (answered, or not raised yet), the state's list.
	for _, in := range head.Interrupts {
		var p nodes.EscalationPayload
		if err := in.Decode(&p); err != nil || p.TaskID == "" {
			continue
		}
		rep.Escalations = append(rep.Escalations, nodes.Escalation{TaskID: p.TaskID, Reason: p.Reason, Error: p.Error})
	}
	if len(rep.Escalations) == 0 {
		rep.Escalations = append(rep.Escalations, st.Escalations.Get()...)
	}
	return rep
}

// currentTaskIDs lists the tasks of the selected batch that are not
// finished (in progress, or pending a retry), then the other tasks in
// progress, in plan order. A finished batch stays in the state after the
// run moved on; its tasks are not current.
func currentTaskIDs(st nodes.State) []string {
	ids := []string{}
	seen := map[string]bool{}
	for _, id := range st.Batch.Get() {
		t, ok := st.Tasks.Get(id)
		if !ok || seen[id] || (t.Status != planner.StatusInProgress && t.Status != planner.StatusPending) {
			continue
		}
		seen[id] = true
		ids = append(ids, id)
	}
	for _, t := range st.Tasks.Values() {
		if t.Status == planner.StatusInProgress && !seen[t.ID] {
			seen[t.ID] = true
			ids = append(ids, t.ID)
		}
	}
	return ids
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printStatus(w io.Writer, rep statusReport) {
	st := rep.head.State
	fmt.Fprintf(w, "run %s: %s\n", rep.RunID, rep.Status)
	fmt.Fprintf(w, "product %s, repo %s\n", rep.run.ProductPath, rep.run.Repo)
	fmt.Fprintf(w, "started %s, updated %s\n", localTime(rep.run.CreatedAt), localTime(rep.run.UpdatedAt))
	sum := rep.Tasks
	if sum.Total == 0 {
		fmt.Fprintln(w, "no tasks planned yet")
	} else {
		fmt.Fprintf(w, "progress %s: %d of %d tasks completed\n", sum.Progress, sum.Completed, sum.Total)
		var parts []string
		for _, c := range []struct {
			name string
			n    int
		}{
			{"pending", sum.Pending}, {"in_progress", sum.InProgress}, {"completed", sum.Completed},
			{"failed", sum.Failed}, {"blocked", sum.Blocked}, {"skipped", sum.Skipped},
		} {
			parts = append(parts, fmt.Sprintf("%s %d", c.name, c.n))
		}
		fmt.Fprintf(w, "tasks: %s\n", strings.Join(parts, ", "))
	}
	if len(rep.CurrentTaskIDs) > 0 {
		fmt.Fprintln(w, "current tasks:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, id := range rep.CurrentTaskIDs {
			t, _ := st.Tasks.Get(id)
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", id, t.Status, nodes.AttemptLabel(nodes.CurrentAttempt(st, id), t.Attempts+1, t.MaxAttempts), t.Title)
		}
		tw.Flush()
	}
	if ms := st.Milestones.Get(); len(ms) > 0 {
		tasks := st.Tasks.Values()
		fmt.Fprintln(w, "milestones:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, m := range ms {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.ID, planner.MilestoneStatus(m.ID, tasks), m.Name)
		}
		tw.Flush()
	}
	if len(rep.Escalations) > 0 {
		fmt.Fprintln(w, "escalations:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, e := range rep.Escalations {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.TaskID, e.Reason, firstLineOf(e.Error))
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "usage: %s\n", rep.Usage)
	if len(rep.NoChange) > 0 {
		fmt.Fprintf(w, "no_change: %s (completed without changes: the tests passed on what was already there)\n", strings.Join(rep.NoChange, ", "))
	}
	switch {
	case rep.Status == nodes.RunPaused || len(rep.head.Interrupts) > 0:
		fmt.Fprintf(w, "next: review the escalations with taskloom review %s, then taskloom resume %s\n", rep.RunID, rep.RunID)
	case rep.Status == nodes.RunInterrupted:
		fmt.Fprintf(w, "next: taskloom resume %s\n", rep.RunID)
	case rep.Status == nodes.RunRunning && len(rep.head.Next) > 0:
		fmt.Fprintf(w, "next step: %s\n", strings.Join(dedupe(rep.head.Next), ", "))
	}
}

// dedupe drops repeated names, keeping the first of each.
func dedupe(names []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func localTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// runsOpts are the options of taskloom runs.
type runsOpts struct {
	Repo       string
	ConfigFile string
	JSON       bool
}

// Validate checks the options.
func (o *runsOpts) Validate() error {
	if o.Repo == "" {
		o.Repo = "."
	}
	return nil
}

func newRunsCmd(a *app) *cobra.Command {
	o := &runsOpts{}
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the runs in the store: ID, PRODUCT.md, status, started, progress",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd, a.stdout)
		},
	}
	f := cmd.Flags()
	addStoreFlags(f, &o.Repo)
	f.BoolVar(&o.JSON, "json", false, "print the runs as a JSON array")
	return cmd
}

// runRow is a line of taskloom runs.
type runRow struct {
	RunID     string            `json:"run_id"`
	Product   string            `json:"product"`
	Repo      string            `json:"repo"`
	Status    string            `json:"status"`
	StartedAt time.Time         `json:"started_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	Progress  string            `json:"progress"`
	Tasks     scheduler.Summary `json:"tasks"`
	// Error says why the run's state cannot be read; such a run is listed
	// all the same, and the other runs with it.
	Error string `json:"error,omitempty"`
}

// Run lists the runs, newest first.
func (o *runsOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	s, err := openReadSession(ctx, cmd, o.Repo, o.ConfigFile)
	if errors.Is(err, errNoStore) {
		// No store is no runs: a list, not an error.
		if o.JSON {
			return writeJSON(w, []runRow{})
		}
		fmt.Fprintln(w, err)
		return nil
	}
	if err != nil {
		return err
	}
	defer s.Close()
	runs, err := s.store.Runs(ctx)
	if err != nil {
		return err
	}
	g, err := s.graph()
	if err != nil {
		return err
	}
	rows := make([]runRow, 0, len(runs))
	for _, r := range runs {
		row := runRow{RunID: r.ID, Product: r.ProductPath, Repo: r.Repo, Status: r.Status, StartedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
		head, _, err := headState(ctx, g, r.ID)
		if errors.Is(err, checkpoint.ErrCorrupt) {
			// One damaged run does not hide the others.
			row.Progress, row.Error = "unreadable", err.Error()
			rows = append(rows, row)
			continue
		}
		if err != nil {
			return err
		}
		row.Tasks = scheduler.Summarize(head.State.Tasks.Values())
		row.Progress = row.Tasks.Progress
		rows = append(rows, row)
	}
	if o.JSON {
		return writeJSON(w, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(w, "no runs in %s; start one with taskloom run PRODUCT.md\n", checkpoint.MaskURL(s.dbURL))
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPRODUCT\tSTATUS\tSTARTED\tPROGRESS")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s: %s\n", r.RunID, productName(r.Product, r.Repo), r.Status,
				localTime(r.StartedAt), r.Progress, r.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s (%d/%d)\n", r.RunID, productName(r.Product, r.Repo), r.Status,
			localTime(r.StartedAt), r.Progress, r.Tasks.Completed, r.Tasks.Total)
	}
	return tw.Flush()
}

// productName shows a PRODUCT.md relative to its repo when it is inside.
func productName(product, repo string) string {
	if rel, err := filepath.Rel(repo, product); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return product
}
