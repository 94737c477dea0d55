package runview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
)

// setup returns a view at t0 whose clock the test moves, fed a plan of
// three tasks of which two run.
func setup(t *testing.T, opts Opts) (*View, *bytes.Buffer, *time.Time) {
	t.Helper()
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	var out bytes.Buffer
	opts.RunID, opts.Workers = "R1", 2
	opts.NowFunc = func() time.Time { return now }
	v := New(&out, opts)
	var plan nodes.State
	for _, task := range []planner.Task{
		{ID: "T1", Title: "Add the calculator's parser", Status: planner.StatusPending, EstimatedMinutes: 10},
		{ID: "T2", Title: "Add the evaluator", Status: planner.StatusPending, EstimatedMinutes: 20},
		{ID: "T3", Title: "Wire the command line", Status: planner.StatusPending, EstimatedMinutes: 5, Dependencies: []string{"T1", "T2"}},
	} {
		plan.Tasks.Put(task.ID, task)
	}
	plan.Warnings.Set([]string{"T3 is vague"})
	v.Graph(graph.Event{Kind: graph.EventUpdate, Node: nodes.NodeBreakdown, Update: plan})
	var sel nodes.State
	for _, id := range []string{"T1", "T2"} {
		task, _ := v.tr.Task(id)
		task.Status = planner.StatusInProgress
		sel.Tasks.Put(id, task)
	}
	v.Graph(graph.Event{Kind: graph.EventUpdate, Node: nodes.NodeSelect, Update: sel})
	return v, &out, &now
}

func TestLiveViewFitsEightyColumns(t *testing.T) {
	t.Parallel()
	v, _, now := setup(t, Opts{Model: "anthropic:claude-sonnet-4-5", NoColor: true})
	l := &liveView{v: v, w: 80, initial: 80}
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "write_to_file", Summary: "internal/calculator/parser/lexer/tokens_and_positions_test.go"})
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "model", Usage: agent.Usage{InputTokens: 12000, OutputTokens: 800, CostUSD: 0.048}})
	v.Activity(nodes.Activity{TaskID: "T2", Attempt: 1, Tool: nodes.ActivityWait, Wait: 87 * time.Second, Reason: "overloaded",
		Summary: "waiting for provider 87s (overloaded)"})
	*now = now.Add(75 * time.Second)
	screen := l.render()
	t.Logf("the live view at 80 columns:\n%s", screen)
	lines := strings.Split(screen, "\n")
	for _, line := range lines {
		require.LessOrEqual(t, ansi.StringWidth(line), 80, "line wider than 80 columns: %q", line)
	}
	require.Regexp(t, `^1\s+T1\s+1\s+1:15\s+write_to_file …/tokens_and_positions_test\.go\s+12\.8k\s+\$0\.05$`, lines[1])
	require.Regexp(t, `^2\s+T2\s+1\s+1:15\s+waiting for provider 12s \(overloaded\)\s+0\s+\$0\.00$`, lines[2])
	require.Contains(t, lines[3], "0/3 tasks done · ETA ~25m · 12.8k tokens · $0.05")
}

func TestJSONEventsFollowTheSchema(t *testing.T) {
	t.Parallel()
	v, out, _ := setup(t, Opts{JSON: true})
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "read_file", Summary: "go.mod"})
	var ver nodes.State
	ver.Attempts.Put("T1/1", nodes.Attempt{TaskID: "T1", Attempt: 1, Verified: true})
	v.Graph(graph.Event{Kind: graph.EventUpdate, Node: nodes.NodeVerifyParallel, Update: ver})
	var in nodes.State
	in.Attempts.Put("T1/1", nodes.Attempt{TaskID: "T1", Attempt: 1, Verified: true, Integrated: "abc123"})
	v.Graph(graph.Event{Kind: graph.EventUpdate, Node: nodes.NodeIntegrate, Update: in})
	v.Finish(graph.Result[nodes.State]{}, nodes.RunInterrupted, 130)

	want := map[string][]string{
		"plan_ready":      {"tasks", "warnings"},
		"task_started":    {"task_id", "attempt", "worker"},
		"worker_activity": {"task_id", "attempt", "tool", "summary"},
		"task_verified":   {"task_id", "attempt", "passed", "error"},
		"task_integrated": {"task_id", "attempt", "commit"},
		"usage":           {"usage"},
		"run_finished":    {"status", "exit_code"},
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		typ, _ := ev["type"].(string)
		types = append(types, typ)
		fields, ok := want[typ]
		require.True(t, ok, "unexpected type in %s", line)
		keys := append([]string{"ts", "run_id", "type"}, fields...)
		require.Len(t, ev, len(keys), line)
		for _, k := range keys {
			require.Contains(t, ev, k, line)
		}
		require.Equal(t, "R1", ev["run_id"])
	}
	require.Equal(t, []string{"plan_ready", "task_started", "task_started", "worker_activity", "task_verified", "task_integrated", "usage", "run_finished"}, types)
	require.Contains(t, out.String(), `"exit_code":130`)
	require.Contains(t, out.String(), `"worker":2`)
}

func TestFinishSaysWhatHappenedToEveryTask(t *testing.T) {
	t.Parallel()
	var st nodes.State
	st.Tasks.Put("T1", planner.Task{ID: "T1", Status: planner.StatusCompleted})
	st.Tasks.Put("T2", planner.Task{ID: "T2", Status: planner.StatusSkipped})
	st.Tasks.Put("T3", planner.Task{ID: "T3", Status: planner.StatusBlocked, Dependencies: []string{"T2"}})
	st.Tasks.Put("T4", planner.Task{ID: "T4", Status: planner.StatusCompleted})
	st.Attempts.Put("T1/2", nodes.Attempt{TaskID: "T1", Attempt: 2, Integrated: "0123456789abcdef"})
	st.Attempts.Put("T4/1", nodes.Attempt{TaskID: "T4", Attempt: 1, NoChange: true})
	var out bytes.Buffer
	v := New(&out, Opts{RunID: "R1"})
	v.Finish(graph.Result[nodes.State]{State: st}, nodes.RunPartial, 5)
	require.Equal(t, `run R1: partial (50%: 2 of 4 tasks completed)
  T1  integrated (0123456789)
  T2  skipped
  T3  blocked by T2 (skipped)
  T4  no change
usage: 0 input, 0 output, 0 cache read, 0 cache write tokens, no cost (the model is not in the price table)
no_change: true for T4 (completed: the tests passed, but the worker changed nothing)
ended partial: 1 skipped, 1 blocked; the rest is done
`, out.String())
}

// A run that ended failed says why, in text and in its run_finished event;
// one that completed has no why.
func TestFinishSaysWhyARunFailed(t *testing.T) {
	t.Parallel()
	var st nodes.State
	st.Tasks.Put("T1", planner.Task{ID: "T1", Status: planner.StatusCompleted})
	st.OutcomeReason.Set("main fails its build verification and no integrated task explains it: go vet failed")
	var out bytes.Buffer
	New(&out, Opts{RunID: "R1"}).Finish(graph.Result[nodes.State]{State: st}, nodes.RunFailed, 4)
	require.Contains(t, out.String(), "\nwhy: main fails its build verification and no integrated task explains it: go vet failed\n")
	out.Reset()
	New(&out, Opts{RunID: "R1", JSON: true}).Finish(graph.Result[nodes.State]{State: st}, nodes.RunFailed, 4)
	require.Contains(t, out.String(), `"reason":"main fails its build verification`)
	out.Reset()
	New(&out, Opts{RunID: "R1"}).Finish(graph.Result[nodes.State]{State: st}, nodes.RunCompleted, 0)
	require.NotContains(t, out.String(), "why:")
}

// A run stopped with an attempt cut short counts the model calls that
// attempt made, which no checkpoint holds yet; a run that ended counts
// what its state records.
func TestStoppedRunCountsTheCallsOfItsCutShortAttempts(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	v := New(&out, Opts{RunID: "R1"})
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "model", Usage: agent.Usage{InputTokens: 1000, OutputTokens: 100}})
	v.Finish(graph.Result[nodes.State]{}, nodes.RunInterrupted, 130)
	require.Contains(t, out.String(), "usage: 1000 input, 100 output")
	out.Reset()
	v = New(&out, Opts{RunID: "R1"})
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "model", Usage: agent.Usage{InputTokens: 1000, OutputTokens: 100}})
	var st nodes.State
	st.Attempts.Put("T1/1", nodes.Attempt{TaskID: "T1", Attempt: 1, InputTokens: 900, OutputTokens: 90})
	v.Finish(graph.Result[nodes.State]{State: st}, nodes.RunCompleted, 0)
	require.Contains(t, out.String(), "usage: 900 input, 90 output")
}

func TestInterruptedEndsWithTheResumeCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	New(&out, Opts{RunID: "R9"}).Finish(graph.Result[nodes.State]{}, nodes.RunInterrupted, 130)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Equal(t, "taskloom resume R9", lines[len(lines)-1])
}

// Ctrl-C ends a run's step with the cancelled context: no error line for
// that, while a node's own error still gets one.
func TestStoppedStepIsNoError(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	v := New(&out, Opts{RunID: "R1"})
	stopped := fmt.Errorf("node implement_tasks_parallel: agent worker: conversation R1/T2/1 cancelled: %w", context.Canceled)
	v.Graph(graph.Event{Kind: graph.EventError, Step: 3, Err: stopped, Error: stopped.Error()})
	require.Empty(t, out.String())
	failed := errors.New("node build_verification: disk full")
	v.Graph(graph.Event{Kind: graph.EventError, Step: 6, Err: failed, Error: failed.Error()})
	require.Regexp(t, `^\d\d:\d\d:\d\d error in step 6: node build_verification: disk full\n$`, out.String())
}

// A run whose attempts all go to taskloom worker processes says so, not
// "0 worker(s)".
func TestStartedWithQueueWorkers(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	New(&out, Opts{RunID: "R1", Workers: 0}).Started("", "", "main", "")
	require.Contains(t, out.String(), "integrating into branch main with the queue's taskloom worker processes\n")
	out.Reset()
	New(&out, Opts{RunID: "R1", Workers: 2}).Started("", "", "main", "")
	require.Contains(t, out.String(), "integrating into branch main with 2 worker(s)\n")
}

// In plain lines, the queue's news about an attempt is a line of its own.
func TestQueueActivityIsALine(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	v := New(&out, Opts{RunID: "R1"})
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "queue", Summary: "waiting for a worker"})
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "bash", Summary: "go test ./..."})
	require.Regexp(t, `^\d\d:\d\d:\d\d T1 attempt 1: waiting for a worker\n$`, out.String())
}

// A model call in flight shows as such in the worker's row, not as the
// tool before it, and gives way once the model has replied.
func TestModelCallInFlightShows(t *testing.T) {
	t.Parallel()
	v := New(&bytes.Buffer{}, Opts{RunID: "R1"})
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "write_to_file", Summary: "a.go"})
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "model", Summary: agent.WaitingForModel})
	w, start := v.work["T1"], v.now()
	require.Equal(t, "write_to_file a.go", w.activityNow(start), "a quick call leaves the tool in view")
	require.Equal(t, agent.WaitingForModel, w.activityNow(start.Add(3*time.Second)), "a slow one shows")
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "model", Summary: "turn 2", Usage: agent.Usage{InputTokens: 10}})
	require.Equal(t, "write_to_file a.go", w.activityNow(start.Add(3*time.Second)), "it replied")
	require.Equal(t, 10, w.usage.InputTokens)
}

// A wait for the provider counts down in the worker's row.
func TestProviderWaitCountsDown(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	v := New(&bytes.Buffer{}, Opts{RunID: "R1", NowFunc: func() time.Time { return now }})
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: nodes.ActivityWait, Wait: 19 * time.Second, Reason: "rate_limit",
		Summary: nodes.WaitSummary(19*time.Second, "rate_limit")})
	w := v.work["T1"]
	require.Equal(t, "waiting for provider 19s (rate_limit)", w.activityNow(now))
	require.Equal(t, "waiting for provider 11s (rate_limit)", w.activityNow(now.Add(8*time.Second)))
	require.Equal(t, agent.WaitingForModel, w.activityNow(now.Add(20*time.Second)), "then the call is tried again")
	v.Activity(nodes.Activity{TaskID: "T1", Attempt: 1, Tool: "read_file", Summary: "a.go"})
	require.Equal(t, "read_file a.go", w.activityNow(now.Add(9*time.Second)), "the wait is over once the worker goes on")
}
