package report

import (
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
