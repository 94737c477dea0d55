package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
)

// The batch a run last selected is current only while the run works on
// it: paused for a review, or ended, no task is current.
func TestCurrentTaskIDs(t *testing.T) {
	var st nodes.State
	st.Tasks.Put("T1", planner.Task{ID: "T1", Status: planner.StatusFailed})
	st.Tasks.Put("T2", planner.Task{ID: "T2", Status: planner.StatusPending})
	st.Tasks.Put("T3", planner.Task{ID: "T3", Status: planner.StatusInProgress})
	st.Batch = graph.V([]string{"T1", "T2"})
	require.Equal(t, []string{"T2", "T3"}, currentTaskIDs(st, nodes.RunRunning))
	require.Equal(t, []string{"T2", "T3"}, currentTaskIDs(st, nodes.RunInterrupted))
	require.Equal(t, []string{"T3"}, currentTaskIDs(st, nodes.RunPaused))
	st.Tasks.Put("T3", planner.Task{ID: "T3", Status: planner.StatusCompleted})
	require.Equal(t, []string{}, currentTaskIDs(st, nodes.RunPaused))
}

// A running run's current tasks say what their worker does and, when the
// queue's workers hold the attempts, which worker process that is; a run
// that is not running names no activity, which would be stale.
func TestStatusWriteNamesTheWorker(t *testing.T) {
	var st nodes.State
	st.Tasks.Put("T1", planner.Task{ID: "T1", Title: "one", Status: planner.StatusInProgress, MaxAttempts: 3})
	st.Tasks.Put("T2", planner.Task{ID: "T2", Title: "two", Status: planner.StatusInProgress, MaxAttempts: 3})
	rep := Status{RunID: "r1", Status: nodes.RunRunning, CurrentTaskIDs: []string{"T1", "T2"},
		Workers: []nodes.WorkerStatus{{TaskID: "T1", Activity: "shell go test", Host: "box-b:412"}, {TaskID: "T2", Activity: "running tests"}},
		head:    graph.Result[nodes.State]{State: st}}
	var out strings.Builder
	require.NoError(t, rep.Write(&out))
	require.Contains(t, out.String(), "(shell go test, on box-b:412)")
	require.Contains(t, out.String(), "(running tests)")
	rep.Status = nodes.RunInterrupted
	out.Reset()
	require.NoError(t, rep.Write(&out))
	require.NotContains(t, out.String(), "box-b")
}

// A failed run's status says why it failed.
func TestStatusOfAFailedRunSaysWhy(t *testing.T) {
	var st nodes.State
	st.OutcomeReason.Set("main fails its build verification and no integrated task explains it: go vet failed")
	rep := NewStatus(nodes.Run{ID: "r1", Status: nodes.RunFailed}, graph.Result[nodes.State]{State: st})
	require.Equal(t, st.OutcomeReason.Get(), rep.Reason)
	var out strings.Builder
	require.NoError(t, rep.Write(&out))
	require.Contains(t, out.String(), "run r1: failed\nwhy: main fails its build verification")
	rep = NewStatus(nodes.Run{ID: "r1", Status: nodes.RunRunning}, graph.Result[nodes.State]{State: st})
	require.Empty(t, rep.Reason, "a stale reason of an earlier end")
}
