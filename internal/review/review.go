// Package review is a person's review of a run paused for one: its
// pending escalations, what is shown of each, the decisions taken (from
// flags or from prompts on a terminal), checked as the pipeline will apply
// them, and their recording as the answer to the run's interrupts.
package review

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/worktree"
)

// Actions are the decisions a review can take, in the order they are
// offered.
var Actions = []string{nodes.ActionFixed, nodes.ActionRetry, nodes.ActionSkip, nodes.ActionAbort}

// UsageError is a decision that the command line cannot take as given.
type UsageError string

func (e UsageError) Error() string { return string(e) }

func usageError(format string, args ...any) error { return UsageError(fmt.Sprintf(format, args...)) }

// Escalation is one pending human_escalation interrupt with what the run
// knows about its task.
type Escalation struct {
	interruptID string
	payload     nodes.EscalationPayload
	task        planner.Task
	attempt     *nodes.Attempt
}

// Review is one review of a run: its pending escalations and the decisions
// taken so far.
type Review struct {
	runID     string
	flags     string // go with the taskloom commands it prints
	repo      string // the run's repository, for the git commands shown
	branch    string // the run's target branch
	pending   []Escalation
	tasks     []planner.Task // the tasks as the decisions so far leave them
	decisions map[string]nodes.Decision
	// recorded are the decisions an earlier review recorded, by task ID,
	// which the run acts on when it resumes.
	recorded map[string]nodes.Decision
	// notes say, by interrupt ID, what the reviewer should mind about a
	// decision taken.
	notes map[string]string
}

// New collects the pending escalations of a run's newest checkpoint.
// repo is the run's repository; flags go with the taskloom commands it
// prints (" --db URL"), so that they find the run's store.
func New(runID, repo, flags string, res graph.Result[nodes.State]) (*Review, error) {
	rv := &Review{runID: runID, repo: repo, branch: res.State.Branch.Get(), flags: flags, tasks: res.State.Tasks.Values(),
		decisions: map[string]nodes.Decision{}, recorded: map[string]nodes.Decision{}, notes: map[string]string{}}
	if recorded, err := nodes.RecordedDecisions(res); err == nil {
		rv.recorded = recorded
	}
	for _, in := range res.Interrupts {
		if in.Node != nodes.NodeEscalation {
			continue
		}
		e := Escalation{interruptID: in.ID}
		if err := in.Decode(&e.payload); err != nil {
			return nil, fmt.Errorf("run %s: escalation %s: %w", runID, in.ID, err)
		}
		e.task, _ = res.State.Tasks.Get(e.payload.TaskID)
		if e.payload.Attempt != "" {
			if a, ok := res.State.Attempts.Get(e.payload.Attempt); ok {
				e.attempt = &a
			}
		}
		rv.pending = append(rv.pending, e)
	}
	if len(rv.pending) > 0 {
		return rv, nil
	}
	if res.Status == graph.StatusPending && slices.Contains(res.Next, nodes.NodeEscalation) {
		return nil, fmt.Errorf("run %s has no pending escalation: its review decisions are recorded; continue it with taskloom resume %s%s", runID, runID, flags)
	}
	if escs := res.State.Escalations.Get(); res.Status == graph.StatusPending && len(escs) > 0 {
		// Escalated tasks wait while the others run: the run asks for
		// the review once nothing else is left.
		ids := make([]string, len(escs))
		for i, e := range escs {
			ids[i] = e.TaskID
		}
		return nil, fmt.Errorf("run %s has not paused for review yet: the other tasks run first, then it pauses for the review of %s; if the run is stopped, resume it: taskloom resume %s%s",
			runID, strings.Join(ids, ", "), runID, flags)
	}
	if res.Status == graph.StatusPending {
		// The checkpoint cannot tell a live run from one killed mid-step.
		return nil, fmt.Errorf("run %s is not waiting for a review: it is running, or it stopped before it paused (then resume it: taskloom resume %s%s); nothing to decide", runID, runID, flags)
	}
	return nil, fmt.Errorf("run %s is not waiting for a review (it is %s); nothing to decide", runID, nodes.StatusOf(res, nil))
}

// taskIDs lists the task IDs of escalations.
func taskIDs(escs []Escalation) string {
	ids := make([]string, len(escs))
	for i, e := range escs {
		ids[i] = e.payload.TaskID
	}
	return strings.Join(ids, ", ")
}

// Select returns the pending escalations of the tasks ids, or all of
// them when ids is empty.
func (rv *Review) Select(ids []string) ([]Escalation, error) {
	if len(ids) == 0 {
		return rv.pending, nil
	}
	var out []Escalation
	for _, id := range ids {
		n := 0
		for _, e := range rv.pending {
			if e.payload.TaskID == id {
				out = append(out, e)
				n++
			}
		}
		if d, ok := rv.recorded[id]; n == 0 && ok {
			return nil, fmt.Errorf("task %s of run %s has a decision already (%s), which the run acts on when it resumes; the tasks still waiting for one: %s",
				id, rv.runID, d.Action, taskIDs(rv.pending))
		}
		if n == 0 {
			return nil, fmt.Errorf("task %s has no pending escalation in run %s (pending: %s)", id, rv.runID, taskIDs(rv.pending))
		}
	}
	return out, nil
}

// CheckNote refuses a note with any action but retry, with a UsageError:
// only a retry has a next attempt whose worker reads the note, so a note
// with another action would be stored and never read.
func CheckNote(action, note string) error {
	if strings.TrimSpace(note) != "" && action != nodes.ActionRetry {
		return UsageError("a note goes with retry only")
	}
	return nil
}

// DecideFromFlags takes the decision of --action for the selected tasks.
func (rv *Review) DecideFromFlags(selected []Escalation, ids []string, action, note string) error {
	if err := CheckNote(action, note); err != nil {
		return err
	}
	d := nodes.Decision{Action: action, Note: strings.TrimSpace(note)}
	if action == nodes.ActionAbort {
		rv.abort(d)
		return nil
	}
	if len(ids) == 0 && len(rv.pending) > 1 {
		return usageError("run %s has %d escalated tasks (%s): pass --task ID for each decision", rv.runID, len(rv.pending), taskIDs(rv.pending))
	}
	for _, e := range selected {
		if err := rv.decide(e, d); err != nil {
			return err
		}
	}
	return nil
}

// abort answers every pending escalation with d: the run ends aborted.
func (rv *Review) abort(d nodes.Decision) {
	for _, e := range rv.pending {
		rv.decisions[e.interruptID] = d
	}
}

// decide checks that the pipeline can apply d to e's task, as
// human_escalation will, and takes it. A task said to be fixed by hand
// must have its files on the target branch: the tasks after it build on
// them.
func (rv *Review) decide(e Escalation, d nodes.Decision) error {
	if d.Action == nodes.ActionFixed && rv.repo != "" && rv.branch != "" && len(e.task.FilesToCreate) > 0 {
		missing, err := worktree.MissingOnBranch(rv.repo, rv.branch, e.task.FilesToCreate)
		switch {
		case err != nil:
		case len(missing) == len(e.task.FilesToCreate):
			// None of them: the fix is not there.
			return fmt.Errorf("%s is not fixed on %s yet: its last commit has none of %s; commit the fix on %s, then mark it fixed",
				e.payload.TaskID, rv.branch, strings.Join(missing, ", "), rv.branch)
		case len(missing) > 0:
			// A fix by hand may lay the files out otherwise: said, not
			// refused.
			rv.notes[e.interruptID] = fmt.Sprintf("%s's last commit has no %s", rv.branch, strings.Join(missing, ", "))
		}
	}
	tasks, err := nodes.ApplyDecision(rv.tasks, e.payload.TaskID, d)
	if err != nil {
		return fmt.Errorf("cannot %s %s in run %s: %w", d.Action, e.payload.TaskID, rv.runID, err)
	}
	rv.tasks = tasks
	rv.decisions[e.interruptID] = d
	return nil
}

// Complete reports whether every pending escalation has a decision.
func (rv *Review) Complete() bool {
	for _, e := range rv.pending {
		if _, ok := rv.decisions[e.interruptID]; !ok {
			return false
		}
	}
	return true
}

// RedactNote hides in a reviewer's note the values of this environment's
// secrets (the variables a worker's commands do not get), as tool output
// hides them.
func RedactNote(note string) string {
	return proc.NewRedactor(os.Environ(), proc.DefaultEnvAllow).Redact(note)
}

// Record stores the decisions with one Answer and prints them.
func (rv *Review) Record(ctx context.Context, g *graph.Runnable[nodes.State], w io.Writer) error {
	if len(rv.decisions) == 0 {
		return fmt.Errorf("no decision taken for run %s; nothing was recorded", rv.runID)
	}
	// A note goes to the store and into the retry's prompt: a secret
	// pasted into it (a key from this environment) is not kept.
	values := make(map[string]any, len(rv.decisions))
	for id, d := range rv.decisions {
		d.Note = RedactNote(d.Note)
		rv.decisions[id] = d
		values[id] = d
	}
	if err := g.Answer(ctx, rv.runID, values); err != nil {
		return session.BusyMessage(rv.runID, fmt.Errorf("record the review of run %s: %w", rv.runID, err))
	}
	fmt.Fprintf(w, "recorded for run %s:\n", rv.runID)
	var left []Escalation
	for _, e := range rv.pending {
		d, ok := rv.decisions[e.interruptID]
		if !ok {
			left = append(left, e)
			continue
		}
		line := fmt.Sprintf("  %-10s %s", e.payload.TaskID, d.Action)
		if d.Note != "" {
			line += fmt.Sprintf(" (note: %s)", d.Note)
		}
		if n := rv.notes[e.interruptID]; n != "" {
			line += " (mind: " + n + ")"
		}
		fmt.Fprintln(w, line)
	}
	if len(left) > 0 {
		fmt.Fprintf(w, "still waiting for a decision: %s (taskloom review %s%s)\n", taskIDs(left), rv.runID, rv.flags)
	}
	return nil
}
