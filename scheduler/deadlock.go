package scheduler

import (
	"fmt"
	"strings"

	"github.com/taskloom/taskloom/planner"
)

// StatusUnknown stands for the status of a dependency that names no task.
const StatusUnknown planner.Status = "unknown"

// Wait is one dependency a stuck task waits on.
type Wait struct {
	TaskID string         `json:"task_id"`
	Status planner.Status `json:"status"` // StatusUnknown when no task has that ID
}

// Stuck is a pending or blocked task that cannot start, with the
// dependencies that are not completed, in the order the task lists them.
type Stuck struct {
	TaskID  string         `json:"task_id"`
	Status  planner.Status `json:"status"`
	WaitsOn []Wait         `json:"waits_on"`
}

// DeadlockError says that no task can start although some are unfinished.
type DeadlockError struct {
	Stuck []Stuck
}

// Error reads like "deadlock: T3 waits on T2 (failed); T4 waits on T3
// (blocked), T9 (unknown)".
func (e *DeadlockError) Error() string {
	var b strings.Builder
	b.WriteString("deadlock: ")
	for i, s := range e.Stuck {
		if i > 0 {
			b.WriteString("; ")
		}
		if len(s.WaitsOn) == 0 {
			fmt.Fprintf(&b, "%s is %s", s.TaskID, s.Status)
			continue
		}
		fmt.Fprintf(&b, "%s waits on ", s.TaskID)
		for j, w := range s.WaitsOn {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s (%s)", w.TaskID, w.Status)
		}
	}
	return b.String()
}

// Deadlock returns a *DeadlockError when no task is available and none is in
// progress while some are still pending or blocked; otherwise nil. The error
// names every pending or blocked task, in list order, with what it waits on.
// Failed tasks on their own are escalations, not a deadlock; their blocked
// dependents are reported here.
func Deadlock(tasks []planner.Task) error {
	g := newGraph(tasks, nil)
	var stuck []Stuck
	for i := range tasks {
		t := &tasks[i]
		switch t.Status {
		case planner.StatusInProgress:
			return nil
		case planner.StatusPending, planner.StatusBlocked:
			if g.isAvailable(i) {
				return nil
			}
			s := Stuck{TaskID: t.ID, Status: t.Status}
			for _, d := range t.Dependencies {
				j, ok := g.byID[d]
				switch {
				case !ok:
					s.WaitsOn = append(s.WaitsOn, Wait{TaskID: d, Status: StatusUnknown})
				case tasks[j].Status != planner.StatusCompleted:
					s.WaitsOn = append(s.WaitsOn, Wait{TaskID: d, Status: tasks[j].Status})
				}
			}
			stuck = append(stuck, s)
		}
	}
	if len(stuck) == 0 {
		return nil
	}
	return &DeadlockError{Stuck: stuck}
}
