package nodes_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/verify"
)

func TestAttemptReadsLegacySeq(t *testing.T) {
	t.Parallel()
	// Before attempts had one number, "seq" was the attempt number and
	// "attempt" restarted after a review's retry.
	var a nodes.Attempt
	require.NoError(t, json.Unmarshal([]byte(`{"task_id": "T1", "attempt": 1, "seq": 4, "commit": "abc"}`), &a))
	require.Equal(t, nodes.Attempt{TaskID: "T1", Attempt: 4, Commit: "abc"}, a)
	require.NoError(t, json.Unmarshal([]byte(`{"task_id": "T1", "attempt": 2}`), &a))
	require.Equal(t, 2, a.Attempt)
	out, err := json.Marshal(nodes.Attempt{TaskID: "T1", Attempt: 3})
	require.NoError(t, err)
	require.NotContains(t, string(out), "seq")
}

func attemptKeyOf(a nodes.Attempt) string { return a.TaskID + "/" + strconv.Itoa(a.Attempt) }

func TestCurrentAndLastAttempt(t *testing.T) {
	t.Parallel()
	task := func(status planner.Status) graph.Keyed[planner.Task] {
		return graph.K(func(t planner.Task) string { return t.ID }, planner.Task{ID: "T1", Status: status})
	}
	failed := nodes.Attempt{TaskID: "T1", Attempt: 1, Error: "tests failed"}
	running := nodes.Attempt{TaskID: "T1", Attempt: 2}
	passed := nodes.Attempt{TaskID: "T1", Attempt: 2, Verified: true, Tests: &verify.Verdict{Passed: true}}
	for _, tc := range []struct {
		name     string
		s        nodes.State
		current  int
		last     int
		haveLast bool
	}{
		{"never started", nodes.State{Tasks: task(planner.StatusPending)}, 1, 0, false},
		{"first attempt running", nodes.State{Tasks: task(planner.StatusInProgress)}, 1, 0, false},
		{"retry pending", nodes.State{Tasks: task(planner.StatusPending), Attempts: graph.K(attemptKeyOf, failed)}, 2, 1, true},
		{"retry running", nodes.State{Tasks: task(planner.StatusInProgress), Attempts: graph.K(attemptKeyOf, failed)}, 2, 1, true},
		{"implemented, being verified", nodes.State{Tasks: task(planner.StatusInProgress), Attempts: graph.K(attemptKeyOf, failed, running)}, 2, 2, true},
		{"passed, being integrated", nodes.State{Tasks: task(planner.StatusInProgress), Attempts: graph.K(attemptKeyOf, failed, passed)}, 2, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.current, nodes.CurrentAttempt(tc.s, "T1"), "current")
			a, ok := nodes.LastAttempt(tc.s, "T1")
			require.Equal(t, tc.haveLast, ok)
			require.Equal(t, tc.last, a.Attempt, "last")
		})
	}
	require.Equal(t, "attempt 2 of 3", nodes.AttemptLabel(2, 2, 3))
	require.Equal(t, "attempt 5, 1 of max_attempts 3", nodes.AttemptLabel(5, 1, 3))
}
