package ui

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/verify"
)

// A poll that misses a whole try (attempt 1 failed, attempt 2 ran and
// passed its tests, not yet integrated) reports both verdicts and the
// start of attempt 2, the number the run uses, in the task's slot.
func TestFollowerMissesAWholeTry(t *testing.T) {
	t.Parallel()
	f := newFollower("r", func() time.Time { return time.Unix(0, 0) })
	snap := func(tasks []planner.Task, attempts ...nodes.Attempt) *snapshot {
		var s nodes.State
		for _, task := range tasks {
			s.Tasks.Put(task.ID, task)
		}
		for _, a := range attempts {
			s.Attempts.Put(a.TaskID+"/"+strconv.Itoa(a.Attempt), a)
		}
		return &snapshot{state: s, recorded: nodes.RunRunning}
	}
	require.Empty(t, f.next(snap([]planner.Task{{ID: "T", Status: planner.StatusPending, MaxAttempts: 3}})))
	evs := f.next(snap([]planner.Task{{ID: "T", Status: planner.StatusInProgress, MaxAttempts: 3}}))
	require.Len(t, evs, 1)
	require.Equal(t, nodes.EventTaskStarted, evs[0].Type)
	require.Equal(t, 1, evs[0].Attempt)

	a1 := nodes.Attempt{TaskID: "T", Attempt: 1, Tests: &verify.Verdict{}, Error: "tests failed"}
	a2 := nodes.Attempt{TaskID: "T", Attempt: 2, Verified: true, Changed: true, Tests: &verify.Verdict{}}
	evs = f.next(snap([]planner.Task{{ID: "T", Status: planner.StatusInProgress, Attempts: 1, Error: "tests failed", MaxAttempts: 3}}, a1, a2))
	var got []string
	for _, e := range evs {
		got = append(got, e.Type+" "+strconv.Itoa(e.Attempt))
	}
	require.Equal(t, []string{"task_verified 1", "task_verified 2", "task_started 2"}, got)
	require.Equal(t, 1, evs[2].Worker, "in the task's slot")
}
