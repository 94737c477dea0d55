package report

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// A paused run whose review decided some escalations lists the decisions
// apart from the escalations still waiting, and says what comes next.
func TestStatusListsRecordedDecisions(t *testing.T) {
	payload := func(id string) json.RawMessage {
		b, _ := json.Marshal(nodes.EscalationPayload{TaskID: id, Reason: nodes.ReasonMaxAttempts})
		return b
	}
	head := graph.Result[nodes.State]{
		Interrupts: []graph.Interruption{{ID: "7/human_escalation/1", Node: nodes.NodeEscalation, Value: payload("T4")}},
		Answered: []graph.Answered{{Interruption: graph.Interruption{ID: "7/human_escalation/0", Node: nodes.NodeEscalation, Value: payload("T2")},
			Answer: json.RawMessage(`{"action":"skip","note":"not needed"}`)}},
	}
	rep := NewStatus(nodes.Run{ID: "r1", Status: nodes.RunPaused}, head)
	require.Equal(t, []Decided{{TaskID: "T2", Action: "skip", Note: "not needed"}}, rep.Decisions)
	data, err := json.Marshal(Decided{TaskID: "T3", Action: "fixed"})
	require.NoError(t, err)
	require.JSONEq(t, `{"task_id": "T3", "action": "fixed", "note": ""}`, string(data), "the documented keys, note even when empty")
	require.Len(t, rep.Escalations, 1)
	var out strings.Builder
	require.NoError(t, rep.Write(&out))
	require.Contains(t, out.String(), "decided in review, acted on when the run resumes:\n  T2  skip  not needed\n")
	require.Contains(t, out.String(), "next: review the escalations with taskloom review r1")

	head.Interrupts = nil
	rep = NewStatus(nodes.Run{ID: "r1", Status: nodes.RunPaused}, head)
	out.Reset()
	require.NoError(t, rep.Write(&out))
	require.Contains(t, out.String(), "next: taskloom resume r1 (every escalation has a decision)")

	head.Answered = nil
	head.State.Escalations.Set([]nodes.Escalation{{TaskID: "T4"}})
	rep = NewStatus(nodes.Run{ID: "r1", Status: nodes.RunPaused}, head)
	out.Reset()
	require.NoError(t, rep.Write(&out))
	require.Contains(t, out.String(), "next: taskloom resume r1 (the other tasks run first; the run then pauses for the review of T4)")
}

// A run in progress was updated at its newest log line, not when its
// registry entry last changed (its start).
func TestStatusUpdatedAtTheNewestStep(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	var st nodes.State
	st.Log.Add(nodes.Entry{Time: start.Add(90 * time.Second), Text: "T1 passed its tests"})
	rep := NewStatus(nodes.Run{ID: "r1", Status: nodes.RunRunning, CreatedAt: start, UpdatedAt: start}, graph.Result[nodes.State]{State: st})
	var out strings.Builder
	require.NoError(t, rep.Write(&out))
	require.Contains(t, out.String(), "started 2026-01-02 03:04:05, updated 2026-01-02 03:05:35\n")
}
