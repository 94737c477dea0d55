package report

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
)

func histTasks(statuses ...string) graph.Keyed[planner.Task] {
	var tasks []planner.Task
	for i := 0; i+1 < len(statuses); i += 2 {
		tasks = append(tasks, planner.Task{ID: statuses[i], Status: planner.Status(statuses[i+1])})
	}
	return graph.K(histTaskKey, tasks...)
}

func histTaskKey(t planner.Task) string { return t.ID }

func histAttemptKey(a nodes.Attempt) string { return a.TaskID + "/" + strconv.Itoa(a.Attempt) }

func histLog(texts ...string) graph.Append[nodes.Entry] {
	var es []nodes.Entry
	for _, s := range texts {
		es = append(es, nodes.Entry{Text: s})
	}
	return graph.A(es...)
}

func TestSummarizeStep(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	forkMeta, _ := json.Marshal(map[string]any{"forked_from": "r-old", "step": 7})
	for _, tc := range []struct {
		name      string
		info      graph.CheckpointInfo
		prev, cur nodes.State
		noPrev    bool
		want      string
		changes   []TaskChange
		log       []string
	}{
		{
			name: "input",
			info: graph.CheckpointInfo{Step: 0, Source: "input", Writers: []string{graph.START}},
			cur:  nodes.State{RunID: graph.V("r1")},
			want: "run started",
		},
		{
			name: "plan",
			info: graph.CheckpointInfo{Step: 1, Source: "loop", Writers: []string{nodes.NodeBreakdown}},
			cur:  nodes.State{Tasks: histTasks("T1", "pending", "T2", "pending"), Log: histLog("planned 2 tasks in 1 milestones")},
			want: "planned 2 tasks (T1, T2)",
			log:  []string{"planned 2 tasks in 1 milestones"},
		},
		{
			name: "many tasks planned",
			info: graph.CheckpointInfo{Step: 1, Source: "loop"},
			cur: nodes.State{Tasks: histTasks("T1", "pending", "T2", "pending", "T3", "pending", "T4", "pending",
				"T5", "pending", "T6", "pending", "T7", "pending", "T8", "pending")},
			want: "planned 8 tasks (T1, T2, T3, T4, T5, T6, … 2 more)",
		},
		{
			name: "status changes and integration",
			info: graph.CheckpointInfo{Step: 5, Source: "loop", Writers: []string{nodes.NodeVerifyParallel}},
			prev: nodes.State{Tasks: histTasks("T1", "in_progress", "T2", "in_progress", "T3", "pending"),
				Integrated: graph.A("T0/1"), Log: histLog("old")},
			cur: nodes.State{Tasks: histTasks("T1", "completed", "T2", "pending", "T3", "pending"),
				Integrated: graph.A("T0/1", "T1/1"), Log: histLog("old", "T1 passed", "T2 failed")},
			want:    "T1 in_progress→completed; T2 in_progress→pending; integrated T1/1",
			changes: []TaskChange{{"T1", "in_progress", "completed"}, {"T2", "in_progress", "pending"}},
			log:     []string{"T1 passed", "T2 failed"},
		},
		{
			name: "failed attempt",
			info: graph.CheckpointInfo{Step: 7, Source: "loop"},
			prev: nodes.State{Tasks: graph.K(histTaskKey, planner.Task{ID: "T2", Status: "in_progress", Attempts: 1})},
			cur: nodes.State{Tasks: graph.K(histTaskKey, planner.Task{ID: "T2", Status: "pending", Attempts: 2}),
				// Attempts 1 and 2 came before a review's retry: the
				// summary names the attempt number, not the count.
				Attempts: graph.K(histAttemptKey, nodes.Attempt{TaskID: "T2", Attempt: 3}, nodes.Attempt{TaskID: "T2", Attempt: 4})},
			want:    "T2 in_progress→pending (attempt 4 failed)",
			changes: []TaskChange{{"T2", "in_progress", "pending"}},
		},
		{
			name: "parallel workers",
			info: graph.CheckpointInfo{Step: 8, Source: "loop", Writers: []string{nodes.NodeImplementParallel, nodes.NodeImplementParallel}},
			prev: nodes.State{Tasks: histTasks("T1", "in_progress", "T2", "in_progress"), Log: histLog("old")},
			cur: nodes.State{Tasks: histTasks("T1", "in_progress", "T2", "in_progress"),
				Log: histLog("old", "T1 attempt 1: worker finished (done)", "T2 attempt 3: worker finished (done)")},
			want: "T1 attempt 1: worker finished (done); T2 attempt 3: worker finished (done)",
			log:  []string{"T1 attempt 1: worker finished (done)", "T2 attempt 3: worker finished (done)"},
		},
		{
			name: "escalation",
			info: graph.CheckpointInfo{Step: 9, Source: "loop"},
			prev: nodes.State{Tasks: histTasks("T1", "in_progress")},
			cur: nodes.State{Tasks: histTasks("T1", "failed"),
				Escalations: graph.V([]nodes.Escalation{{TaskID: "T1", Reason: nodes.ReasonMaxAttempts, Error: "boom"}})},
			want:    "T1 in_progress→failed; escalated T1 (max_attempts)",
			changes: []TaskChange{{"T1", "in_progress", "failed"}},
		},
		{
			name: "same escalations are not repeated",
			info: graph.CheckpointInfo{Step: 10, Source: "loop"},
			prev: nodes.State{Escalations: graph.V([]nodes.Escalation{{TaskID: "T1", Reason: "cycle"}}), Log: histLog()},
			cur:  nodes.State{Escalations: graph.V([]nodes.Escalation{{TaskID: "T1", Reason: "cycle"}}), Log: histLog("review: skip T1")},
			want: "review: skip T1",
			log:  []string{"review: skip T1"},
		},
		{
			name: "outcome",
			info: graph.CheckpointInfo{Step: 12, Source: "loop", Writers: []string{nodes.NodeBuild}},
			prev: nodes.State{Tasks: histTasks("T1", "completed")},
			cur:  nodes.State{Tasks: histTasks("T1", "completed"), Outcome: graph.V(nodes.OutcomeCompleted)},
			want: "run completed",
		},
		{
			name: "outcome with a task skipped",
			info: graph.CheckpointInfo{Step: 12, Source: "loop", Writers: []string{nodes.NodeBuild}},
			prev: nodes.State{Tasks: histTasks("T1", "completed", "T2", "skipped")},
			cur:  nodes.State{Tasks: histTasks("T1", "completed", "T2", "skipped"), Outcome: graph.V(nodes.OutcomeCompleted)},
			want: "run partial",
		},
		{
			name: "batch selected without a status change",
			info: graph.CheckpointInfo{Step: 3, Source: "loop"},
			prev: nodes.State{Tasks: histTasks("T1", "in_progress")},
			cur:  nodes.State{Tasks: histTasks("T1", "in_progress"), Batch: graph.V([]string{"T1"})},
			want: "selected T1",
		},
		{
			name: "nothing",
			info: graph.CheckpointInfo{Step: 4, Source: "loop"},
			prev: nodes.State{Tasks: histTasks("T1", "in_progress")},
			cur:  nodes.State{Tasks: histTasks("T1", "in_progress")},
			want: "no task changed",
		},
		{
			name: "update",
			info: graph.CheckpointInfo{Step: 4, Source: "update"},
			prev: nodes.State{RunID: graph.V("a")},
			cur:  nodes.State{RunID: graph.V("b")},
			want: "state updated",
		},
		{
			name:   "fork",
			info:   graph.CheckpointInfo{Step: 0, Source: "fork", Meta: forkMeta},
			cur:    nodes.State{Tasks: histTasks("T1", "completed"), Log: histLog("a", "b")},
			noPrev: true,
			want:   "forked from run r-old at checkpoint 7",
			log:    []string{"b"},
		},
		{
			name:   "pruned: only the newest log line",
			info:   graph.CheckpointInfo{Step: 40, Source: "loop"},
			cur:    nodes.State{Tasks: histTasks("T1", "completed"), Log: histLog("a", "T1 passed")},
			noPrev: true,
			want:   "T1 passed",
			log:    []string{"T1 passed"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.info.CreatedAt = at
			got := summarizeStep(tc.info, tc.prev, tc.cur, !tc.noPrev)
			require.Equal(t, tc.want, got.Summary, "summary")
			if tc.changes == nil {
				tc.changes = []TaskChange{}
			}
			require.Equal(t, tc.changes, got.Changes, "changes")
			if tc.log == nil {
				tc.log = []string{}
			}
			require.Equal(t, tc.log, got.Log, "log")
			require.Equal(t, tc.info.Step, got.Step)
			require.Equal(t, at, got.Time)
			require.NotNil(t, got.Nodes)
		})
	}
}

func TestNodesLabel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		writers []string
		source  string
		want    string
	}{
		{nil, "update", "(update)"},
		{[]string{"select_task"}, "loop", "select_task"},
		{[]string{"implement_tasks_parallel", "implement_tasks_parallel", "x"}, "loop", "implement_tasks_parallel×2,x"},
	} {
		require.Equal(t, tc.want, nodesLabel(tc.writers, tc.source), "%v", tc.writers)
	}
}
