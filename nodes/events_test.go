package nodes

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/verify"
)

var eventTime = time.Date(2025, 6, 1, 12, 0, 0, 5, time.FixedZone("CEST", 7200))

// Each event type writes ts, run_id, type and its own fields, no others.
func TestRunEventJSON(t *testing.T) {
	t.Parallel()
	cost := 0.25
	full := RunEvent{
		TS: eventTime, RunID: "r", TargetBranch: "main", Workers: 2,
		Tasks: []PlannedTask{{ID: "T1", Title: "Add", Dependencies: []string{}, Minutes: 2}}, Warnings: []string{"w"},
		TaskID: "T1", Attempt: 2, Worker: 1, Tool: "write_to_file", Summary: "calc/add.go", Reason: "rate_limit", Seconds: 1.5,
		Passed: true, Error: "e", Commit: "abc", Usage: UsageReport{InputTokens: 3, CostUSD: &cost}, Status: RunCompleted, ExitCode: 0,
	}
	for typ, fields := range map[string][]string{
		EventRunStarted:     {"target_branch", "workers"},
		EventPlanReady:      {"tasks", "warnings"},
		EventTaskStarted:    {"task_id", "attempt", "worker"},
		EventWorkerActivity: {"task_id", "attempt", "tool", "summary"},
		EventProviderWait:   {"reason", "seconds"},
		EventTaskVerified:   {"task_id", "attempt", "passed", "error"},
		EventTaskIntegrated: {"task_id", "attempt", "commit"},
		EventTaskEscalated:  {"task_id", "reason"},
		EventUsage:          {"usage"},
		EventRunFinished:    {"status", "exit_code", "reason"}, // reason: a failed or aborted run's
	} {
		e := full
		e.Type = typ
		data, err := json.Marshal(e)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(data, &m))
		require.Equal(t, slices.Sorted(slices.Values(append(fields, "ts", "run_id", "type"))), slices.Sorted(maps.Keys(m)), typ)
		require.Equal(t, "2025-06-01T10:00:00.000000005Z", m["ts"])
		require.Equal(t, typ, m["type"])
	}
	data, err := json.Marshal(RunEvent{TS: eventTime, RunID: "r", Type: EventPlanReady})
	require.NoError(t, err)
	require.Contains(t, string(data), `"tasks":[]`)
	require.Contains(t, string(data), `"warnings":[]`)
}

// A resumed run's tracker starts from the stored state: its running tasks
// take worker slots again.
func TestTrackerSeedAndSlots(t *testing.T) {
	t.Parallel()
	var s State
	s.Tasks.Put("T1", planner.Task{ID: "T1", Title: "Add", Status: planner.StatusInProgress})
	s.Tasks.Put("T2", planner.Task{ID: "T2", Title: "Sub", Status: planner.StatusPending})
	s.Tasks.Put("T3", planner.Task{ID: "T3", Title: "Mul", Status: planner.StatusInProgress, Attempts: 1})
	s.Attempts.Put("T3/1", Attempt{TaskID: "T3", Attempt: 1, Error: "failed"})
	s.Attempts.Put("T1/1", Attempt{TaskID: "T1", Attempt: 1})
	tr := &Tracker{RunID: "r", NowFunc: func() time.Time { return eventTime }}
	evs := tr.Seed(s)
	var got []string
	for _, e := range evs {
		require.Equal(t, EventTaskStarted, e.Type)
		got = append(got, e.TaskID+"/"+itoa(e.Attempt)+" worker "+itoa(e.Worker))
	}
	require.Equal(t, []string{"T1/1 worker 1", "T3/2 worker 2"}, got, "T1 is being verified, T3 retries")
	require.Equal(t, []Slot{{Worker: 1, TaskID: "T1", Attempt: 1, Since: eventTime}, {Worker: 2, TaskID: "T3", Attempt: 2, Since: eventTime}}, tr.Slots())
	task, ok := tr.Task("T2")
	require.True(t, ok)
	require.Equal(t, "Sub", task.Title)
	_, ok = tr.Task("T9")
	require.False(t, ok)
	var ids []string
	for _, task := range tr.Tasks() {
		ids = append(ids, task.ID)
	}
	require.Equal(t, []string{"T1", "T2", "T3"}, ids)

	// T1 ends: its slot is free for the next task that starts.
	var u State
	u.Tasks.Put("T1", planner.Task{ID: "T1", Status: planner.StatusCompleted})
	u.Attempts.Put("T1/1", Attempt{TaskID: "T1", Attempt: 1, Integrated: "abc", Verified: true})
	evs = tr.Graph(graph.Event{Kind: graph.EventUpdate, Node: NodeIntegrate, Update: u})
	require.Len(t, evs, 1)
	require.Equal(t, EventTaskIntegrated, evs[0].Type)
	require.Equal(t, "abc", evs[0].Commit)
	require.Equal(t, Slot{Worker: 1}, tr.Slots()[0])
	u = State{}
	u.Tasks.Put("T2", planner.Task{ID: "T2", Status: planner.StatusInProgress})
	evs = tr.Graph(graph.Event{Kind: graph.EventUpdate, Node: NodeSelect, Update: u})
	require.Len(t, evs, 1)
	require.Equal(t, 1, evs[0].Worker, "the free slot is taken again")
	require.Nil(t, tr.Graph(graph.Event{Kind: graph.EventUpdate, Update: "not a state"}))
	require.Nil(t, tr.Graph(graph.Event{Kind: graph.EventNodeStart}))

	// A failed verdict says why in one line, from the tests when the
	// attempt has no error of its own.
	u = State{}
	u.Attempts.Put("T2/1", Attempt{TaskID: "T2", Attempt: 1, Tests: &verify.Verdict{Output: "--- FAIL: TestSub\nmore"}})
	evs = tr.Graph(graph.Event{Kind: graph.EventUpdate, Node: NodeVerify, Update: u})
	require.Len(t, evs, 1)
	require.False(t, evs[0].Passed)
	require.NotEmpty(t, evs[0].Error)

	// T2 is retried between two looks at the run: a page that polls the
	// store sees it still in progress, its attempt moved on. Attempt 2
	// starts in T2's slot, once.
	u = State{}
	u.Tasks.Put("T2", planner.Task{ID: "T2", Status: planner.StatusInProgress, Attempts: 1})
	evs = tr.Graph(graph.Event{Kind: graph.EventUpdate, Node: "poll", Update: u})
	require.Len(t, evs, 1)
	require.Equal(t, EventTaskStarted, evs[0].Type)
	require.Equal(t, "T2", evs[0].TaskID)
	require.Equal(t, 2, evs[0].Attempt)
	require.Equal(t, 1, evs[0].Worker)
	require.Empty(t, tr.Graph(graph.Event{Kind: graph.EventUpdate, Node: "poll", Update: u}))
	require.Equal(t, Slot{Worker: 1, TaskID: "T2", Attempt: 2, Since: eventTime}, tr.Slots()[0])
}

// status --json's workers: one per running task, in batch order, with
// when it started and what the next step does.
func TestWorkers(t *testing.T) {
	t.Parallel()
	t0 := eventTime
	var s State
	s.Tasks.Put("T1", planner.Task{ID: "T1", Status: planner.StatusInProgress})
	s.Tasks.Put("T2", planner.Task{ID: "T2", Status: planner.StatusInProgress})
	s.Tasks.Put("T3", planner.Task{ID: "T3", Status: planner.StatusCompleted})
	s.Batch.Set([]string{"T2", "T1"})
	s.Log.Add(Entry{Time: t0, TaskID: "T1", Text: "started T1 (attempt 1 of 3): Add"})
	s.Log.Add(Entry{Time: t0.Add(time.Minute), TaskID: "T1", Text: "T1 failed attempt 1 of 3; retrying"})
	s.Log.Add(Entry{Time: t0.Add(2 * time.Minute), TaskID: "T1", Text: "started T1 (attempt 2 of 3): Add"})
	s.Log.Add(Entry{Time: t0.Add(3 * time.Minute), TaskID: "T3", Text: "started T3"})
	s.Attempts.Put("T1/1", Attempt{TaskID: "T1", Attempt: 1, Error: "x"})
	for next, activity := range map[string]string{NodeVerifyParallel: "running tests", NodeIntegrate: "integrating", NodeImplementParallel: "implementing"} {
		ws := Workers(graph.Result[State]{State: s, Next: []string{next}})
		require.Len(t, ws, 2)
		require.Equal(t, "T2", ws[0].TaskID)
		require.Nil(t, ws[0].Since)
		require.Equal(t, "T1", ws[1].TaskID)
		require.Equal(t, 2, ws[1].Worker)
		require.Equal(t, 2, ws[1].Attempt)
		require.Equal(t, t0.Add(2*time.Minute), *ws[1].Since, "the last start")
		require.Equal(t, activity, ws[0].Activity)
	}
	require.Equal(t, []WorkerStatus{}, Workers(graph.Result[State]{}))
}

func TestUsageReport(t *testing.T) {
	t.Parallel()
	u := llm.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadTokens: 10, CacheWriteTokens: 1, CostUSD: 0.0123, Estimated: true}
	priced := NewUsageReport(u, "anthropic:claude-sonnet-4-5")
	require.NotNil(t, priced.CostUSD)
	require.Equal(t, "1000 input, 100 output, 10 cache read, 1 cache write tokens (partly estimated: a provider reported no usage), $0.0123", priced.String())
	unpriced := NewUsageReport(llm.Usage{InputTokens: 5}, "scripted:session.json")
	require.Nil(t, unpriced.CostUSD)
	require.Equal(t, "5 input, 0 output, 0 cache read, 0 cache write tokens, no cost (the model is not in the price table)", unpriced.String())
	data, err := json.Marshal(unpriced)
	require.NoError(t, err)
	require.Contains(t, string(data), `"cost_usd":null`)
	// An agent CLI reports its own cost, whatever the model spec says.
	cli := NewUsageReport(llm.Usage{InputTokens: 5, CostUSD: 0.01}, "scripted:session.json")
	require.NotNil(t, cli.CostUSD)
	require.InDelta(t, 0.01, *cli.CostUSD, 1e-9)
	// An agent CLI that reported nothing: the total says what it lacks.
	silent := NewUsageReport(u.Add(llm.Usage{Unreported: true}), "anthropic:claude-sonnet-4-5")
	require.True(t, silent.Unreported)
	require.Equal(t, "1000 input, 100 output, 10 cache read, 1 cache write tokens (partly estimated: a provider reported no usage), $0.0123; not counted: the agent CLI's own calls (it reported no usage)", silent.String())
}

// A task that waits for its review says why in the run's summary, not
// only that it is not done.
func TestFateOfAnEscalatedTask(t *testing.T) {
	t.Parallel()
	var s State
	s.Tasks.Put("T1", planner.Task{ID: "T1", Status: planner.StatusPending})
	s.Tasks.Put("T2", planner.Task{ID: "T2", Status: planner.StatusPending})
	s.Escalations.Set([]Escalation{{TaskID: "T1", Reason: ReasonProvider, Error: "HTTP 529 (overloaded); gave up after 5 requests"}})
	fates := Fates(s)
	require.Equal(t, "not done: waiting for a review (provider): HTTP 529 (overloaded); gave up after 5 requests", fates[0].String())
	require.Equal(t, "not done", fates[1].String())
}
