package review

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/verify"
)

func TestReviewInteractiveViewAll(t *testing.T) {
	t.Parallel()
	rv := &Review{runID: "r1", decisions: map[string]nodes.Decision{}}
	long := strings.Repeat("failing line\n", 60)
	e := Escalation{interruptID: "i1", payload: nodes.EscalationPayload{TaskID: "T1", Title: "Long", Reason: nodes.ReasonMaxAttempts, Error: long, Attempts: 3},
		task: planner.Task{ID: "T1", Title: "Long", Status: planner.StatusFailed, Attempts: 3, MaxAttempts: 3}}
	rv.pending = []Escalation{e}
	rv.tasks = []planner.Task{e.task}
	var out bytes.Buffer
	// view all, page once, stop, then fixed (confirmed by default).
	p := NewPrompter(t.Context(), strings.NewReader("v\n\nf\n\n"), &out)
	require.NoError(t, rv.DecideInteractively(p, rv.pending))
	got := out.String()
	require.Contains(t, got, "  … 40 more line(s) cut\n")
	require.Contains(t, got, "[a]bort  [v]iew all > ")
	require.Contains(t, got, "-- 24 more line(s): Enter for more, q to stop -- ")
	require.Equal(t, 20+60, strings.Count(got, "failing line"), "cut view, then the full error")
	require.Equal(t, nodes.Decision{Action: nodes.ActionFixed}, rv.decisions["i1"])
}

func TestReviewShowOne(t *testing.T) {
	t.Parallel()
	failing := verify.Verdict{ExitCode: 1, Format: verify.FormatGoJSON, Total: 4, Failed: 1,
		Failures: []verify.Failure{{Name: "TestAdd", Package: "example/a", Output: "a_test.go:9: got 3, want 4"}},
		Output:   "=== RUN   TestAdd\n    a_test.go:9: got 3, want 4\n--- FAIL: TestAdd (0.00s)\nFAIL\texample/a\t0.01s"}
	failing.Output += strings.Repeat("\nmore output", 40)
	for _, tc := range []struct {
		name    string
		e       Escalation
		want    []string
		notWant []string
		cut     bool
	}{{
		name: "failed tests",
		e: Escalation{
			payload: nodes.EscalationPayload{TaskID: "T1", Title: "Add", Reason: nodes.ReasonMaxAttempts, Error: failing.ErrorContext(4000), Attempts: 3,
				Attempt: "T1/5", Ref: "refs/taskloom/attempts/r1/T1/5"},
			task:    planner.Task{ID: "T1", Status: planner.StatusFailed, Attempts: 3, MaxAttempts: 3},
			attempt: &nodes.Attempt{TaskID: "T1", Attempt: 5, Branch: "b", Diff: "+x", Tests: &failing},
		},
		// Attempt 5: a review's retry gave the task 3 fresh attempts after
		// its first 2.
		want: []string{"== [1/1] T1 — Add\n", "reason:   max attempts reached\n", "attempt:  5, the last (3 of max_attempts 3 failed, status failed)\n",
			"ref:      refs/taskloom/attempts/r1/T1/5\n", "diff:     git show refs/taskloom/attempts/r1/T1/5\n",
			"tests:    1 of 4 failed, go test, exit code 1\n", "error:\n  │ 1 of 4 tests failed", "--- FAIL: TestAdd (example/a)",
			"diff of attempt 5:\n  │ +x\n", "test output:\n  │ === RUN   TestAdd\n", "  … 19 more line(s) cut\n"},
		cut: true,
	}, {
		name: "question",
		e: Escalation{
			payload: nodes.EscalationPayload{TaskID: "T2", Title: "Ask", Reason: nodes.ReasonQuestion, Error: "which port?", Attempts: 0, Attempt: "T2/1"},
			task:    planner.Task{ID: "T2", Status: planner.StatusPending, MaxAttempts: 3},
			attempt: &nodes.Attempt{TaskID: "T2", Attempt: 1, Worktree: "w", Question: "which port?"},
		},
		want: []string{"reason:   the worker has a question\n", "attempt:  1, the last (0 of max_attempts 3 failed, status pending)\n",
			"question:\n  │ which port?\n", "diff of attempt 1:\n  │ (the attempt changed nothing)\n"},
		notWant: []string{"tests:", "test output", "cut", "ref:"},
	}, {
		name: "conflict",
		e: Escalation{
			payload: nodes.EscalationPayload{TaskID: "T3", Title: "Merge", Reason: nodes.ReasonConflict, Error: "merge conflict with main in a.go", Attempts: 3, Attempt: "T3/3"},
			attempt: &nodes.Attempt{TaskID: "T3", Attempt: 3, Conflicts: []string{"a.go", "b.go"}, Diff: "+y", Tests: &verify.Verdict{Passed: true, Format: verify.FormatExitCode}},
		},
		want: []string{"reason:   merge conflict that persists after retries\n", "attempt:  3, the last\n", "tests:    passed, exit code 0\n", "conflicting files:\n  │ a.go\n  │ b.go\n"},
	}, {
		name: "cycle without attempt",
		e: Escalation{
			payload: nodes.EscalationPayload{TaskID: "T4", Title: "Loop", Reason: nodes.ReasonCycle, Error: "dependency cycle T4 -> T5 -> T4"},
			task:    planner.Task{ID: "T4", Status: planner.StatusPending, MaxAttempts: 3},
		},
		want:    []string{"reason:   dependency cycle\n", "attempt:  none yet (0 of max_attempts 3 failed, status pending)\n", "error:\n  │ dependency cycle T4 -> T5 -> T4\n"},
		notWant: []string{"diff", "tests:"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rv := &Review{runID: "r1"}
			var b strings.Builder
			cut := rv.showOne(&b, tc.e, 0, 1, false)
			for _, w := range tc.want {
				require.Contains(t, b.String(), w)
			}
			for _, w := range tc.notWant {
				require.NotContains(t, b.String(), w)
			}
			require.Equal(t, tc.cut, cut, "got:\n%s", b.String())
		})
	}
}

func TestTestSummary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    verify.Verdict
		want string
	}{
		{verify.Verdict{Passed: true, Format: verify.FormatGoJSON, Total: 3}, "passed, go test, exit code 0"},
		{verify.Verdict{Passed: true, Format: verify.FormatExitCode}, "passed, exit code 0"},
		{verify.Verdict{ExitCode: 1, Format: verify.FormatPytestJUnit, Total: 4, Failed: 2}, "2 of 4 failed, pytest, exit code 1"},
		{verify.Verdict{ExitCode: -1, TimedOut: true, Duration: 2*time.Second + 3*time.Millisecond, Format: verify.FormatExitCode}, "timed out after 2.003s"},
		{verify.Verdict{ExitCode: 0, Format: verify.FormatGoJSON + "+" + verify.FormatJestJSON, MissingFiles: []string{"a.go", "b.go"}},
			"failed, go test+jest, exit code 0, missing a.go, b.go"},
	} {
		require.Equal(t, tc.want, TestSummary(tc.v))
	}
}

// A run stopped while its escalated tasks waited for the others is not
// "running": review says that it pauses for the review once resumed and
// the others are done.
func TestNewBeforeThePause(t *testing.T) {
	t.Parallel()
	var st nodes.State
	st.Escalations.Set([]nodes.Escalation{{TaskID: "T1", Reason: nodes.ReasonMaxAttempts}})
	_, err := New("r1", "/repo", " --db x", graph.Result[nodes.State]{Status: graph.StatusPending, Next: []string{nodes.NodeImplement}, State: st})
	require.EqualError(t, err, "run r1 has not paused for review yet: the other tasks run first, then it pauses for the review of T1; if the run is stopped, resume it: taskloom resume r1 --db x")
}

// A run mid-step, or killed there, is not called running: the checkpoint
// cannot tell which, and a stopped one is resumed.
func TestNewMidRun(t *testing.T) {
	t.Parallel()
	_, err := New("r1", "/repo", " --db x", graph.Result[nodes.State]{Status: graph.StatusPending, Next: []string{nodes.NodeImplement}})
	require.EqualError(t, err, "run r1 is not waiting for a review: it is running, or it stopped before it paused (then resume it: taskloom resume r1 --db x); nothing to decide")
}

// A task whose escalation a review decided already is named as such when
// it is selected again, with the decision, not as unknown.
func TestSelectADecidedTask(t *testing.T) {
	t.Parallel()
	payload := func(id string) json.RawMessage {
		b, _ := json.Marshal(nodes.EscalationPayload{TaskID: id})
		return b
	}
	res := graph.Result[nodes.State]{Status: graph.StatusInterrupted,
		Interrupts: []graph.Interruption{{ID: "5/h/1", Node: nodes.NodeEscalation, Value: payload("T2")}},
		Answered: []graph.Answered{{Interruption: graph.Interruption{ID: "5/h/0", Node: nodes.NodeEscalation, Value: payload("T4")},
			Answer: json.RawMessage(`{"action":"skip"}`)}}}
	rv, err := New("r1", "/repo", "", res)
	require.NoError(t, err)
	_, err = rv.Select([]string{"T4"})
	require.EqualError(t, err, "task T4 of run r1 has a decision already (skip), which the run acts on when it resumes; the tasks still waiting for one: T2")
	_, err = rv.Select([]string{"T9"})
	require.EqualError(t, err, "task T9 has no pending escalation in run r1 (pending: T2)")
}

// Fixed by hand needs the fix on the target branch: none of the task's
// files there is refused; some of them is taken, and said, since a fix by
// hand may lay the files out otherwise.
func TestFixedNeedsTheFixOnTheBranch(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	testkit.Git(t, repo, "init", "-q", "-b", "main")
	testkit.WriteFiles(t, repo, map[string]string{"calc/add.go": "package calc\n"})
	testkit.Git(t, repo, "add", "-A")
	testkit.Git(t, repo, "commit", "-q", "-m", "fix by hand")
	payload, _ := json.Marshal(nodes.EscalationPayload{TaskID: "T1"})
	newReview := func(files ...string) *Review {
		var st nodes.State
		st.Branch.Set("main")
		st.Tasks.Put("T1", planner.Task{ID: "T1", Status: planner.StatusFailed, FilesToCreate: files})
		rv, err := New("r1", repo, "", graph.Result[nodes.State]{Status: graph.StatusInterrupted, State: st,
			Interrupts: []graph.Interruption{{ID: "3/h/0", Node: nodes.NodeEscalation, Value: payload}}})
		require.NoError(t, err)
		return rv
	}
	rv := newReview("calc/sub.go", "calc/sub_test.go")
	err := rv.DecideFromFlags(rv.pending, []string{"T1"}, nodes.ActionFixed, "")
	require.EqualError(t, err, "T1 is not fixed on main yet: its last commit has none of calc/sub.go, calc/sub_test.go; commit the fix on main, then mark it fixed")
	rv = newReview("calc/add.go", "calc/extra.go")
	require.NoError(t, rv.DecideFromFlags(rv.pending, []string{"T1"}, nodes.ActionFixed, ""))
	require.Equal(t, "main's last commit has no calc/extra.go", rv.notes["3/h/0"])
}
