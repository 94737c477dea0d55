package report

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

// Status is a run's progress: what status --json prints.
type Status struct {
	RunID  string `json:"run_id"`
	Status string `json:"status"`
	// Reason says why a run that ended failed or aborted did.
	Reason         string               `json:"reason,omitempty"`
	TargetBranch   string               `json:"target_branch"`
	Tasks          scheduler.Summary    `json:"tasks"`
	CurrentTaskIDs []string             `json:"current_task_ids"`
	Workers        []nodes.WorkerStatus `json:"workers"`
	Escalations    []nodes.Escalation   `json:"escalations"`
	// Decisions are the review decisions recorded and not acted on yet:
	// resume acts on them.
	Decisions []Decided `json:"decisions"`
	// NoChange lists the completed tasks whose attempt changed nothing.
	NoChange []string `json:"no_change"`
	// Usage is what the run's model calls used so far.
	Usage nodes.UsageReport `json:"usage"`
	// LinearIssues are the tasks' Linear issues, in plan order, once the
	// run's sync recorded them; absent without the sync.
	LinearIssues []LinearIssue `json:"linear_issues,omitempty"`
	// NextFlags is appended to the taskloom commands Write prints, so
	// that they find the run's store: " --db URL", or "".
	NextFlags string `json:"-"`

	run  nodes.Run // the registry entry
	head graph.Result[nodes.State]
}

// Decided is a review decision recorded for an escalated task.
type Decided struct {
	TaskID string `json:"task_id"`
	Action string `json:"action"`
	// Note is always there, "" when the reviewer wrote none.
	Note string `json:"note"`
}

// LinearIssue is a task's issue in Linear.
type LinearIssue struct {
	TaskID        string `json:"task_id"`
	LinearIssueID string `json:"linear_issue_id"`
}

// RunStatus reads the status of run id of s, or of the latest run on s's
// repo when id is empty.
func RunStatus(ctx context.Context, s *session.Session, id string) (Status, error) {
	run, err := s.FindRun(ctx, id)
	if err != nil {
		return Status{}, err
	}
	g, err := s.Graph()
	if err != nil {
		return Status{}, err
	}
	head, _, err := session.HeadState(ctx, g, run.ID)
	if err != nil {
		return Status{}, err
	}
	threads, err := threadsOf(ctx, s)
	if err != nil {
		return Status{}, err
	}
	run.Status = liveStatus(run, threads, time.Now())
	st := NewStatus(run, head)
	// What the attempts under way used so far counts too: an agent can
	// talk for half an hour before its attempt is recorded.
	unended, err := s.Store.UnendedUsage(ctx, run.ID, head.State)
	if err != nil {
		return st, err
	}
	if unended != (llm.Usage{}) {
		meta, _ := session.ParseMeta(run)
		st.Usage = nodes.NewUsageReport(nodes.RunUsage(head.State).Add(unended), meta.Model)
	}
	// Attempts on the queue are held by workers, here or elsewhere, which
	// say what they are doing in the database.
	if err := s.MarkWorkers(ctx, run.ID, st.Workers); err != nil {
		return st, err
	}
	return st, nil
}

// updated is when the run last changed: its registry entry changes with
// its status, its log with every step that says something.
func (rep Status) updated() time.Time {
	at := rep.run.UpdatedAt
	if n := rep.head.State.Log.Len(); n > 0 {
		if last := rep.head.State.Log.Items()[n-1].Time; last.After(at) {
			at = last
		}
	}
	return at
}

// NewStatus derives a run's status from its registry entry and its newest
// state.
func NewStatus(run nodes.Run, head graph.Result[nodes.State]) Status {
	st := head.State
	rep := Status{
		RunID:          run.ID,
		Status:         run.Status,
		Tasks:          scheduler.Summarize(st.Tasks.Values()),
		CurrentTaskIDs: currentTaskIDs(st, run.Status),
		Workers:        nodes.Workers(head),
		Escalations:    []nodes.Escalation{},
		NoChange:       append([]string{}, nodes.NoChangeTasks(st)...),
		run:            run,
		head:           head,
	}
	for _, t := range st.Tasks.Values() {
		if t.LinearIssueID != "" {
			rep.LinearIssues = append(rep.LinearIssues, LinearIssue{TaskID: t.ID, LinearIssueID: t.LinearIssueID})
		}
	}
	if run.Status == nodes.RunFailed || run.Status == nodes.RunAborted {
		rep.Reason = st.OutcomeReason.Get()
	}
	meta, _ := session.ParseMeta(run)
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
	decided, _ := nodes.RecordedDecisions(head) // one that cannot be read is not shown
	rep.Decisions = []Decided{}
	for _, id := range slices.Sorted(maps.Keys(decided)) {
		rep.Decisions = append(rep.Decisions, Decided{TaskID: id, Action: decided[id].Action, Note: decided[id].Note})
	}
	return rep
}

// currentTaskIDs lists the tasks of the selected batch that are not
// finished (in progress, or pending a retry), then the other tasks in
// progress, in plan order. A finished batch stays in the state after the
// run moved on; its tasks are not current.
func currentTaskIDs(st nodes.State, status string) []string {
	ids := []string{}
	seen := map[string]bool{}
	// A run that waits for a review or has ended works on no batch; the
	// one it last selected is history.
	var batch []string
	if status == nodes.RunRunning || status == nodes.RunInterrupted {
		batch = st.Batch.Get()
	}
	for _, id := range batch {
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

// Write prints the status as text.
func (rep Status) Write(w io.Writer) error {
	st := rep.head.State
	fmt.Fprintf(w, "run %s: %s\n", rep.RunID, rep.Status)
	if rep.Reason != "" {
		fmt.Fprintf(w, "why: %s\n", rep.Reason)
	}
	fmt.Fprintf(w, "product %s, repo %s\n", rep.run.ProductPath, rep.run.Repo)
	fmt.Fprintf(w, "started %s, updated %s\n", localTime(rep.run.CreatedAt), localTime(rep.updated()))
	sum := rep.Tasks
	if sum.Total == 0 {
		fmt.Fprintln(w, "no tasks planned yet")
	} else {
		fmt.Fprintf(w, "progress %s: %d of %d tasks completed\n", sum.Progress, sum.Completed, sum.Total)
		fmt.Fprintf(w, "tasks: pending %d, in_progress %d, completed %d, failed %d, blocked %d, skipped %d\n",
			sum.Pending, sum.InProgress, sum.Completed, sum.Failed, sum.Blocked, sum.Skipped)
	}
	var rows [][]string
	for _, id := range rep.CurrentTaskIDs {
		t, _ := st.Tasks.Get(id)
		row := []string{id, string(t.Status), nodes.AttemptLabel(nodes.CurrentAttempt(st, id), t.Attempts+1, t.MaxAttempts), t.Title}
		if a := rep.activity(id); a != "" {
			row = append(row, a)
		}
		rows = append(rows, row)
	}
	writeRows(w, "current tasks:", rows)
	rows = nil
	for _, m := range st.Milestones.Get() {
		status := string(planner.MilestoneStatus(m.ID, st.Tasks.Values()))
		if skipped := countTasks(st.Tasks.Values(), func(t planner.Task) bool {
			return t.MilestoneID == m.ID && t.Status == planner.StatusSkipped
		}); skipped > 0 && status == string(planner.StatusCompleted) {
			// Done with, not done: the skipped tasks' work is not there.
			status += fmt.Sprintf(" (%d skipped)", skipped)
		}
		rows = append(rows, []string{m.ID, status, m.Name})
	}
	writeRows(w, "milestones:", rows)
	rows = nil
	for _, e := range rep.Escalations {
		rows = append(rows, []string{e.TaskID, e.Reason, clip.Line(e.Error, 0)})
	}
	writeRows(w, "escalations:", rows)
	rows = nil
	for _, d := range rep.Decisions {
		rows = append(rows, []string{d.TaskID, d.Action, d.Note})
	}
	writeRows(w, "decided in review, acted on when the run resumes:", rows)
	fmt.Fprintf(w, "usage: %s\n", rep.Usage)
	if len(rep.NoChange) > 0 {
		fmt.Fprintf(w, "no_change: %s (completed without changes: the tests passed on what was already there)\n", strings.Join(rep.NoChange, ", "))
	}
	paused := rep.Status == nodes.RunPaused
	switch {
	case paused && len(rep.head.Interrupts) == 0 && len(rep.head.Answered) > 0:
		// The escalations listed are the ones a review already decided.
		fmt.Fprintf(w, "next: taskloom resume %s%s (every escalation has a decision)\n", rep.RunID, rep.NextFlags)
	case paused && len(rep.head.Interrupts) == 0 && len(rep.Escalations) > 0:
		// A replan let the other tasks go first: the review comes after.
		fmt.Fprintf(w, "next: taskloom resume %s%s (the other tasks run first; the run then pauses for the review of %s)\n",
			rep.RunID, rep.NextFlags, strings.Join(escalatedIDs(rep.Escalations), ", "))
	case paused && len(rep.head.Interrupts) == 0:
		fmt.Fprintf(w, "next: taskloom resume %s%s\n", rep.RunID, rep.NextFlags)
	case paused || len(rep.head.Interrupts) > 0:
		fmt.Fprintf(w, "next: review the escalations with taskloom review %s%s, then taskloom resume %s%s\n", rep.RunID, rep.NextFlags, rep.RunID, rep.NextFlags)
	case rep.Status == nodes.RunInterrupted:
		fmt.Fprintf(w, "next: taskloom resume %s%s\n", rep.RunID, rep.NextFlags)
	case rep.Status == nodes.RunRunning && len(rep.head.Next) > 0:
		fmt.Fprintf(w, "next step: %s\n", strings.Join(dedupe(rep.head.Next), ", "))
	}
	return nil
}

// activity is what the worker on a task of a running run is doing, and
// which worker process it is when the queue's workers hold the attempts.
func (rep Status) activity(taskID string) string {
	if rep.Status != nodes.RunRunning {
		return "" // nothing is working on it now
	}
	for _, w := range rep.Workers {
		if w.TaskID == taskID {
			if w.Host != "" {
				return fmt.Sprintf("(%s, on %s)", w.Activity, w.Host)
			}
			return "(" + w.Activity + ")"
		}
	}
	return ""
}

// writeRows prints a titled table, indented, unless it has no rows.
func writeRows(w io.Writer, title string, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\n", strings.Join(r, "\t"))
	}
	tw.Flush()
}

// escalatedIDs lists the task IDs of escalations.
func escalatedIDs(escs []nodes.Escalation) []string {
	ids := make([]string, len(escs))
	for i, e := range escs {
		ids[i] = e.TaskID
	}
	return ids
}

func countTasks(tasks []planner.Task, ok func(planner.Task) bool) int {
	n := 0
	for _, t := range tasks {
		if ok(t) {
			n++
		}
	}
	return n
}
