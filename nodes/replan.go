package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

// ReplanOpts configures Replan. nil means a dry run.
type ReplanOpts struct {
	// Apply records the replan as a checkpoint of the run.
	Apply bool
	// FollowUps adds a follow-up task for each completed task that the
	// edited PRODUCT.md changed.
	FollowUps bool
	// Planner scores follow-up tasks.
	Planner *planner.Opts
	// Now stamps the run's log entry; nil means time.Now.
	Now func() time.Time
}

// ReplanResult is a replan of a run and, once applied, the checkpoint that
// holds it.
type ReplanResult struct {
	*planner.Replan
	RunID   string `json:"run_id"`
	Applied bool   `json:"applied"`
	// Checkpoint is the step of the checkpoint that records the replan;
	// `taskloom resume RUN_ID` continues from it, and `resume --from` forks
	// the run there.
	Checkpoint int64 `json:"checkpoint,omitempty"`
}

// inFlightNodes are the nodes that carry a particular attempt from one step
// to the next; a run stopped before one of them had an attempt in flight.
var inFlightNodes = []string{NodeImplement, NodeImplementParallel, NodeVerify, NodeVerifyParallel, NodeIntegrate}

// ReplanFunc plans the edited PRODUCT.md; current are the run's tasks,
// which a model's breakdown is shown so that unchanged tasks keep their IDs.
type ReplanFunc func(ctx context.Context, current []planner.Task) (*planner.Plan, error)

// Replan plans the edited PRODUCT.md with planFunc, merges that plan into
// the run's newest checkpoint (planner.ReplanPlan says how) and, with opts.Apply,
// records the result as a new checkpoint that resume continues from.
//
// A run that has ended is not replanned: its work is done and a new run
// starts from its result. Applying needs the run stopped (paused for
// review or interrupted): a live run holds its lease, and Apply fails
// naming that. When the run stopped with attempts in flight, those attempts
// are cancelled: their tasks go back to pending (or are skipped when
// removed), the attempt cut short not counting against max_attempts, and
// the run goes on from select_task. Escalations of tasks the replan changed,
// removed or unblocked are dropped; the others are asked again once the
// tasks that do not wait on them have run.
func Replan(ctx context.Context, g *graph.Runnable[State], runID string, planFunc ReplanFunc, opts *ReplanOpts) (*ReplanResult, error) {
	if opts == nil {
		opts = &ReplanOpts{}
	}
	res, err := g.State(ctx, runID, -1)
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", runID, err)
	}
	if res.Status == graph.StatusDone {
		return nil, fmt.Errorf("run %s has ended (%s); replan works on a run that is paused or stopped: start a new run for the edited PRODUCT.md", runID, StatusOf(res, nil))
	}
	s := res.State
	old := s.Tasks.Values()
	next, err := planFunc(ctx, old)
	if err != nil {
		return nil, err
	}
	rp, err := planner.ReplanPlan(old, s.Milestones.Get(), next, &planner.ReplanOpts{Opts: opts.Planner, FollowUps: opts.FollowUps})
	if err != nil {
		return nil, fmt.Errorf("replan run %s: %w", runID, err)
	}
	out := &ReplanResult{Replan: rp, RunID: runID}
	inFlight := slices.ContainsFunc(res.Next, func(n string) bool { return slices.Contains(inFlightNodes, n) })
	tasks := slices.Clone(rp.Tasks)
	if inFlight {
		for i := range tasks {
			if tasks[i].Status == planner.StatusInProgress {
				tasks[i].Status = planner.StatusPending
			}
		}
	}
	// Blocked tasks whose dependencies changed or went away are pending
	// again, and the other way round: the difference shows where each
	// task stands once the replan is applied.
	tasks = scheduler.Propagate(tasks)
	before := map[string]planner.Task{}
	for _, t := range old {
		before[t.ID] = t
	}
	// The decisions a review recorded are applied here, to the
	// escalations the replan keeps: the review node, run again after the
	// replan, would ask again under other interrupt IDs, and they would be
	// lost.
	decided, err := RecordedDecisions(res)
	if err != nil {
		return nil, fmt.Errorf("replan run %s: %w", runID, err)
	}
	tasks, waiting, reviewed, err := applyDecisions(tasks, keptEscalations(s.Escalations.Get(), before, tasks), decided)
	var abort *abortError
	if errors.As(err, &abort) {
		return nil, fmt.Errorf("run %s has a review decision to abort it (%s): resume it, and it ends, rather than replan it", runID, abort.task)
	}
	if err != nil {
		return nil, err
	}
	tasks = scheduler.Propagate(tasks)
	rp.Tasks = tasks
	now := map[string]planner.Status{}
	for _, t := range tasks {
		now[t.ID] = t.Status
	}
	for _, lines := range [][]planner.ReplanTask{rp.Kept, rp.Changed, rp.Added, rp.Removed} {
		for i := range lines {
			lines[i].Now = now[lines[i].ID]
		}
	}
	if !opts.Apply {
		return out, nil
	}
	var u State
	for _, t := range tasks {
		if o, ok := before[t.ID]; ok && t.LinearIssueID == "" {
			t.LinearIssueID = o.LinearIssueID // the task's issue stays its own
		}
		if o, ok := before[t.ID]; !ok || !reflect.DeepEqual(o, t) {
			u.Tasks.Put(t.ID, t)
		}
	}
	for _, c := range rp.Changed {
		// An attempt the provider stopped would go on with the old task:
		// the changed one starts afresh.
		key := attemptKey(c.ID, nextAttempt(s, c.ID)-1)
		if a, ok := s.Attempts.Get(key); ok && a.ProviderError != "" && a.Error == "" && a.Integrated == "" {
			a.Error = "the task changed in a replan: its next attempt starts afresh"
			u.Attempts.Put(key, a)
		}
	}
	u.Milestones.Set(rp.Milestones)
	u.Cycles.Set(nil)
	u.Escalations.Set(waiting)
	clock := time.Now
	if opts.Now != nil {
		clock = opts.Now
	}
	u.Log.Add(Entry{Time: clock(), Text: rp.Summary()})
	for _, w := range rp.Warnings {
		u.Log.Add(Entry{Time: clock(), Text: "replan warning: " + w})
	}
	for _, r := range reviewed {
		u.Log.Add(Entry{Time: clock(), Text: r})
	}
	asNode := ""
	switch {
	case inFlight:
		// human_escalation routes to select_task: the attempts in flight
		// are dropped and their tasks selected again.
		asNode = NodeEscalation
		u.Batch.Set(nil)
		u.Escalations.Set(nil)
	case res.Status == graph.StatusInterrupted || len(res.Answered) > 0:
		// Paused for review, or its decisions recorded: the run goes on
		// from select_task, so that the tasks the replan added or
		// unblocked run before the escalations it kept are asked again.
		asNode = NodeEscalation
		u.Batch.Set(nil)
	}
	step, err := g.UpdateState(ctx, runID, asNode, u)
	if err != nil {
		return nil, fmt.Errorf("record the replan of run %s: %w", runID, err)
	}
	out.Applied, out.Checkpoint = true, step
	return out, nil
}

// keptEscalations returns the escalations whose task the replan left as it
// was and that still hold: a deadlock or a cycle is found again if it
// remains.
func keptEscalations(escs []Escalation, before map[string]planner.Task, after []planner.Task) []Escalation {
	var out []Escalation
	for _, e := range escs {
		if e.Reason == ReasonDeadlock || e.Reason == ReasonCycle {
			continue
		}
		i := slices.IndexFunc(after, func(t planner.Task) bool { return t.ID == e.TaskID })
		if o, ok := before[e.TaskID]; ok && i >= 0 && reflect.DeepEqual(o, after[i]) {
			out = append(out, e)
		}
	}
	return out
}

// applyDecisions applies the decisions recorded for escs to tasks, where
// the review step that would have acted on them is set aside (a replan,
// an accepted head). It returns the escalations without a decision, and a
// line per decision applied; an abort is an *abortError, for the caller
// to word.
func applyDecisions(tasks []planner.Task, escs []Escalation, decided map[string]Decision) (_ []planner.Task, waiting []Escalation, reviewed []string, err error) {
	for _, e := range escs {
		d, ok := decided[e.TaskID]
		switch {
		case !ok:
			waiting = append(waiting, e)
			continue
		case d.Action == ActionAbort:
			return tasks, nil, nil, &abortError{task: e.TaskID}
		}
		if tasks, err = ApplyDecision(tasks, e.TaskID, d); err != nil {
			return tasks, nil, nil, err
		}
		reviewed = append(reviewed, strings.TrimSuffix(fmt.Sprintf("review: %s %s: %s", d.Action, e.TaskID, d.Note), ": "))
	}
	return tasks, waiting, reviewed, nil
}

// abortError is a recorded decision to abort the run.
type abortError struct{ task string }

func (e *abortError) Error() string { return "a review decision to abort the run (" + e.task + ")" }

// RecordedDecisions returns the review decisions recorded for a run's
// escalations and not acted on yet, by task ID.
func RecordedDecisions(res graph.Result[State]) (map[string]Decision, error) {
	out := map[string]Decision{}
	for _, a := range res.Answered {
		if a.Node != NodeEscalation {
			continue
		}
		var p EscalationPayload
		var d Decision
		if err := a.Decode(&p); err != nil {
			return nil, fmt.Errorf("escalation %s: %w", a.ID, err)
		}
		if err := json.Unmarshal(a.Answer, &d); err != nil {
			return nil, fmt.Errorf("decision of %s: %w", p.TaskID, err)
		}
		out[p.TaskID] = d
	}
	return out, nil
}
