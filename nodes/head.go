package nodes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
	"github.com/taskloom/taskloom/worktree"
)

// CheckHead returns a *worktree.ResetError when the run's target branch no
// longer contains the last head the run recorded (the head it started
// from, or the last commit it integrated): the user reset or rewrote the
// branch under the run. A run without a checkpoint, or recorded before runs
// kept their head, passes.
func (r *Runner) CheckHead(ctx context.Context, runID string) error {
	st, ok, err := r.latest(ctx, runID)
	if err != nil || !ok {
		return err
	}
	return r.Pipeline.Repo.CheckHead(ctx, runID, st.Head.Get())
}

func (r *Runner) latest(ctx context.Context, runID string) (State, bool, error) {
	g, err := r.Runnable()
	if err != nil {
		return State{}, false, err
	}
	res, err := g.State(ctx, runID, -1)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("read run %s: %w", runID, err)
	}
	return res.State, true, nil
}

// Accepted says what AcceptHead changed.
type Accepted struct {
	// Head is the target branch's head, which the run now builds on.
	Head string
	// Redo lists the completed tasks whose integrated commits are gone
	// from the branch; they are pending again.
	Redo []string
	// Abandoned lists the tasks whose tries were in flight; they are
	// pending again, and their tries count against nothing.
	Abandoned []string
}

// AcceptHead takes the run's target branch as it is now, after the user
// reset or rewrote it: the tasks whose integrated commits the branch no
// longer has (found by their "Taskloom-Task: RUN/TASK/N" trailers) go back
// to pending, the tries in flight are dropped (they may have started from
// a commit the branch lost) and their tasks go back to pending, and the
// branch's head becomes the run's recorded head. The run then goes on from
// task selection. Nothing on the branch is changed.
func (r *Runner) AcceptHead(ctx context.Context, runID string) (Accepted, error) {
	var acc Accepted
	g, err := r.Runnable()
	if err != nil {
		return acc, err
	}
	res, err := g.State(ctx, runID, -1)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return acc, nil
	}
	if err != nil {
		return acc, fmt.Errorf("read run %s: %w", runID, err)
	}
	st := res.State
	// The pending review step is dropped below: the decisions recorded
	// for it are applied here, or they would be lost.
	decided, err := RecordedDecisions(res)
	if err != nil {
		return acc, fmt.Errorf("accept the head of run %s: %w", runID, err)
	}
	repo := r.Pipeline.Repo
	if acc.Head, err = repo.Head(ctx); err != nil {
		return acc, fmt.Errorf("accept the head of run %s: %w", runID, err)
	}
	present, err := repo.IntegratedAttempts(ctx)
	if err != nil {
		return acc, fmt.Errorf("accept the head of run %s: %w", runID, err)
	}
	var u State
	now := r.Pipeline.now()
	tasks := tasksOf(st)
	for _, key := range st.Integrated.Items() {
		rec, ok := st.Attempts.Get(key)
		if !ok || rec.Integrated == "" || present[trailerOf(runID, key, rec)] != "" {
			continue
		}
		rec.Error = fmt.Sprintf("its commit %s is gone from %s (reset or rewritten); the task is redone", short(rec.Integrated), st.Branch.Get())
		rec.Integrated = ""
		u.Attempts.Put(key, rec)
		if t := findTask(tasks, rec.TaskID); t != nil && t.Status == planner.StatusCompleted {
			t.Status, t.Error = planner.StatusPending, ""
			acc.Redo = append(acc.Redo, t.ID)
		}
	}
	for i := range tasks {
		if t := &tasks[i]; t.Status == planner.StatusInProgress {
			t.Status = planner.StatusPending
			acc.Abandoned = append(acc.Abandoned, t.ID)
		}
	}
	tasks, waiting, reviewed, err := applyDecisions(tasks, st.Escalations.Get(), decided)
	var abort *abortError
	if errors.As(err, &abort) {
		return acc, fmt.Errorf("run %s has a review decision to abort it (%s): resume it without --accept-head, and it ends", runID, abort.task)
	}
	if err != nil {
		return acc, fmt.Errorf("accept the head of run %s: %w", runID, err)
	}
	if len(reviewed) > 0 {
		tasks = scheduler.Propagate(tasks)
		u.Escalations.Set(waiting)
		for _, line := range reviewed {
			u.Log.Add(Entry{Time: now, Text: line})
		}
	}
	putChanged(&u, st, tasks)
	slices.Sort(acc.Redo)
	slices.Sort(acc.Abandoned)
	if len(acc.Redo) == 0 && len(acc.Abandoned) == 0 && len(reviewed) == 0 && len(st.Batch.Get()) == 0 {
		reset := repo.CheckHead(ctx, runID, st.Head.Get())
		if reset == nil {
			return acc, nil // nothing to take: the run goes on as it was
		}
		if !errors.Is(reset, worktree.ErrReset) {
			return acc, fmt.Errorf("accept the head of run %s: %w", runID, reset)
		}
	}
	u.Head.Set(acc.Head)
	u.Batch.Set(nil)
	if len(acc.Redo) > 0 && st.Outcome.Get() == OutcomeCompleted {
		u.Outcome.Set("")
	}
	text := fmt.Sprintf("accepted %s at %s", st.Branch.Get(), short(acc.Head))
	if len(acc.Redo) > 0 {
		text += "; gone from it, redone: " + strings.Join(acc.Redo, ", ")
	}
	if len(acc.Abandoned) > 0 {
		text += "; tries in flight dropped: " + strings.Join(acc.Abandoned, ", ")
	}
	u.Log.Add(Entry{Time: now, Text: text})
	// As if a review had just ended: the run goes on from task selection,
	// and the pending step (the tries in flight) is dropped.
	if _, err := g.UpdateState(ctx, runID, NodeEscalation, u); err != nil {
		return acc, fmt.Errorf("accept the head of run %s: %w", runID, err)
	}
	return acc, nil
}

// Landed returns the tasks of st in progress whose current attempt is on
// the target branch already, by its trailer, and not reverted, each with
// its commit: the run stopped after integrating the attempt and before
// recording it. A resume records them, without integrating them again.
func (r *Runner) Landed(ctx context.Context, runID string, st State) (map[string]string, error) {
	var open []string
	for _, t := range st.Tasks.Values() {
		if t.Status == planner.StatusInProgress {
			open = append(open, t.ID)
		}
	}
	if len(open) == 0 {
		return nil, nil
	}
	repo := r.Pipeline.Repo
	present, err := repo.IntegratedAttempts(ctx)
	if err != nil {
		return nil, err
	}
	reverted, err := repo.RevertedAttempts(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, id := range open {
		key := attemptKey(id, CurrentAttempt(st, id))
		trailer := runID + "/" + key
		if rec, ok := st.Attempts.Get(key); ok {
			trailer = trailerOf(runID, key, rec)
		}
		if c := present[trailer]; c != "" && reverted[trailer] == "" {
			out[id] = c
		}
	}
	return out, nil
}

// trailerOf returns the trailer value of an attempt, "RUN/TASK/N". Its
// branch names it: a forked run's attempts from before the fork carry the
// original run's ID.
func trailerOf(runID, key string, rec Attempt) string {
	if id, ok := worktree.AttemptOfBranch(rec.Branch); ok {
		return id
	}
	return runID + "/" + key
}
