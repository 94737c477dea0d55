package scheduler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/planner"
)

// TransitionError reports a change the attempt state machine does not allow,
// or a task ID that is not in the list.
type TransitionError struct {
	TaskID string
	Action string         // start, pass, fail, skip, retry, fix
	From   planner.Status // "" when the task is unknown
}

func (e *TransitionError) Error() string {
	if e.From == "" {
		return fmt.Sprintf("%s task %s: no such task", e.Action, e.TaskID)
	}
	return fmt.Sprintf("%s task %s: not allowed from status %s", e.Action, e.TaskID, e.From)
}

// The functions below are the attempt state machine. Each takes the task
// list and a task ID and returns a new list; the input is never modified.
// Every function that can fail, skip or un-block a task ends with
// Propagate, so the list it returns is consistent.

// Start moves a pending task to in_progress. The attempt that starts is
// the task's Attempts+1-th toward MaxAttempts: Attempts counts its failed
// attempts since the last review. (Its attempt number, which counts every
// attempt and names its ref and trailer, is the pipeline's to keep.)
func Start(tasks []planner.Task, id string) ([]planner.Task, error) {
	return change(tasks, id, "start", func(t *planner.Task) bool {
		if t.Status != planner.StatusPending {
			return false
		}
		t.Status = planner.StatusInProgress
		return true
	})
}

// Pass marks an in-progress task completed (verified and integrated) and
// clears its error.
func Pass(tasks []planner.Task, id string) ([]planner.Task, error) {
	return change(tasks, id, "pass", func(t *planner.Task) bool {
		if t.Status != planner.StatusInProgress {
			return false
		}
		t.Status = planner.StatusCompleted
		t.Error = ""
		return true
	})
}

// Fail records a failed attempt of an in-progress task: Attempts goes up by
// one and Error is set to reason. While Attempts < MaxAttempts (default
// DefaultMaxAttempts) the task goes back to pending to be retried with that
// error; otherwise it becomes failed, its dependents become blocked, and
// escalate is true: a human must decide (see Retry, Skip and Fix).
func Fail(tasks []planner.Task, id, reason string) (out []planner.Task, escalate bool, err error) {
	out, err = change(tasks, id, "fail", func(t *planner.Task) bool {
		if t.Status != planner.StatusInProgress {
			return false
		}
		t.Attempts++
		t.Error = reason
		maxAttempts := t.MaxAttempts
		if maxAttempts <= 0 {
			maxAttempts = DefaultMaxAttempts
		}
		if t.Attempts < maxAttempts {
			t.Status = planner.StatusPending
		} else {
			t.Status = planner.StatusFailed
			escalate = true
		}
		return true
	})
	return out, escalate, err
}

// Requeue makes an in-progress task pending again without counting the
// attempt: what went wrong was not the task's doing (its integration met
// another task's change), and it is redone on the new head.
func Requeue(tasks []planner.Task, id, reason string) ([]planner.Task, error) {
	return change(tasks, id, "requeue", func(t *planner.Task) bool {
		if t.Status != planner.StatusInProgress {
			return false
		}
		t.Status, t.Error = planner.StatusPending, reason
		return true
	})
}

// Skip marks a pending, blocked or failed task skipped. Its dependents become
// blocked unless they are skipped too.
func Skip(tasks []planner.Task, id string) ([]planner.Task, error) {
	return change(tasks, id, "skip", func(t *planner.Task) bool {
		switch t.Status {
		case planner.StatusPending, planner.StatusBlocked, planner.StatusFailed:
			t.Status = planner.StatusSkipped
			return true
		}
		return false
	})
}

// Retry resets a failed, blocked, skipped or pending task for a fresh round
// of attempts: Attempts becomes 0 and the status pending (or blocked, if a
// dependency still holds it back). The last error is kept as context for the
// worker; a non-empty note is appended to ImplementationNotes as
// "Reviewer note: ...".
func Retry(tasks []planner.Task, id, note string) ([]planner.Task, error) {
	return change(tasks, id, "retry", func(t *planner.Task) bool {
		switch t.Status {
		case planner.StatusFailed, planner.StatusBlocked, planner.StatusSkipped, planner.StatusPending:
		default:
			return false
		}
		t.Status = planner.StatusPending
		t.Attempts = 0
		if note = strings.TrimSpace(note); note != "" {
			if t.ImplementationNotes != "" {
				t.ImplementationNotes += "\n"
			}
			t.ImplementationNotes += "Reviewer note: " + note
		}
		return true
	})
}

// Fix marks a task completed because a human fixed it by hand. It is allowed
// from any status but completed and in_progress, and clears the error; its
// dependents are un-blocked.
func Fix(tasks []planner.Task, id string) ([]planner.Task, error) {
	return change(tasks, id, "fix", func(t *planner.Task) bool {
		if t.Status == planner.StatusCompleted || t.Status == planner.StatusInProgress {
			return false
		}
		t.Status = planner.StatusCompleted
		t.Error = ""
		return true
	})
}

// change copies tasks, applies fn to the copy of task id and propagates.
func change(tasks []planner.Task, id, action string, fn func(*planner.Task) bool) ([]planner.Task, error) {
	i := slices.IndexFunc(tasks, func(t planner.Task) bool { return t.ID == id })
	if i < 0 {
		return nil, &TransitionError{TaskID: id, Action: action}
	}
	out := slices.Clone(tasks)
	if !fn(&out[i]) {
		return nil, &TransitionError{TaskID: id, Action: action, From: tasks[i].Status}
	}
	propagate(out)
	return out, nil
}

// Propagate returns a copy of tasks in which every pending or blocked task
// is blocked exactly when one of its dependencies is failed, skipped, or
// itself blocked (transitively). A blocked task whose dependencies have
// recovered (after Retry or Fix) becomes pending again. Other statuses and
// errors are left alone; unknown dependencies block nothing here (Deadlock
// reports them).
func Propagate(tasks []planner.Task) []planner.Task {
	out := slices.Clone(tasks)
	propagate(out)
	return out
}

func propagate(tasks []planner.Task) {
	byID := make(map[string]int, len(tasks))
	for i := range tasks {
		if _, dup := byID[tasks[i].ID]; !dup {
			byID[tasks[i].ID] = i
		}
	}
	waiting := func(s planner.Status) bool { return s == planner.StatusPending || s == planner.StatusBlocked }
	deps := make([][]int, len(tasks))
	for i := range tasks {
		if !waiting(tasks[i].Status) {
			continue
		}
		for _, d := range tasks[i].Dependencies {
			if j, ok := byID[d]; ok {
				deps[i] = append(deps[i], j)
			}
		}
	}
	blocked := make([]bool, len(tasks))
	walk(deps, func(i, j int) {
		switch tasks[j].Status {
		case planner.StatusFailed, planner.StatusSkipped:
			blocked[i] = true
		case planner.StatusPending, planner.StatusBlocked:
			blocked[i] = blocked[i] || blocked[j]
		}
	})
	for i := range tasks {
		switch {
		case tasks[i].Status == planner.StatusPending && blocked[i]:
			tasks[i].Status = planner.StatusBlocked
		case tasks[i].Status == planner.StatusBlocked && !blocked[i]:
			tasks[i].Status = planner.StatusPending
		}
	}
}
