package nodes

import (
	"fmt"

	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

// ApplyDecision applies a review's decision on an escalated task to the
// tasks: fixed completes it, retry gives it fresh attempts (with the note
// for the worker), skip skips it and blocks its dependents. human_escalation
// applies it; taskloom review checks with it that a decision can be
// applied before recording it. Abort concerns the run, not the tasks: it
// leaves them as they are.
func ApplyDecision(tasks []planner.Task, taskID string, d Decision) ([]planner.Task, error) {
	switch d.Action {
	case ActionFixed:
		return scheduler.Fix(tasks, taskID)
	case ActionRetry:
		return scheduler.Retry(tasks, taskID, d.Note)
	case ActionSkip:
		return scheduler.Skip(tasks, taskID)
	case ActionAbort:
		return tasks, nil
	}
	return nil, fmt.Errorf("review of %s: unknown action %q (want fixed, retry, skip or abort)", taskID, d.Action)
}
