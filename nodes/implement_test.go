package nodes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store/storetest"
)

// Each first attempt fails in its own way (an error, a failing external
// CLI, a timeout, a committed secret, a broken worktree, a hook written
// into the repository); each is retried with why, and the second attempts
// are integrated. The secret never reaches any branch.
func TestImplementFailuresAreRetried(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	const secret = "s3cr3t-token-value-42"
	good := map[string]map[string]string{
		"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
		"T2": {"calc/sub.go": subGo, "calc/sub_test.go": subTestGo},
		"T3": {"calc/neg.go": negGo, "calc/neg_test.go": negTestGo},
		"T4": {"calc/mul.go": mulGo, "calc/mul_test.go": mulTestGo},
		"T5": {"calc/one.go": helperOneGo},
		"T6": {"calc/two.go": helperTwoOK},
	}
	files := &fileWorker{script: good}
	one := 1
	w := agent.WorkerFunc(func(ctx context.Context, job agent.Job) (agent.Outcome, error) {
		if job.Attempt > 1 {
			return files.Implement(ctx, job)
		}
		switch job.Task.ID {
		case "T1":
			return agent.Outcome{}, errors.New("the model said nonsense")
		case "T2":
			return agent.Outcome{Status: agent.OutcomeIncomplete, ExitCode: &one, Detail: "claude: exit status 1: no credits"}, nil
		case "T3":
			<-ctx.Done()
			return agent.Outcome{Status: agent.OutcomeIncomplete}, ctx.Err()
		case "T4":
			out, err := files.Implement(ctx, job)
			if err == nil {
				err = os.WriteFile(filepath.Join(job.Worktree, "calc", "config.go"), []byte("package calc\n\nconst token = \""+secret+"\"\n"), 0o644)
			}
			return out, err
		case "T5":
			return agent.Outcome{Status: agent.OutcomeDone}, os.Remove(filepath.Join(job.Worktree, ".git"))
		case "T6":
			hook := filepath.Join(dir, ".git", "hooks", "post-commit")
			return agent.Outcome{Status: agent.OutcomeDone}, os.WriteFile(hook, []byte("#!/bin/sh\necho owned\n"), 0o755)
		}
		return agent.Outcome{}, fmt.Errorf("unexpected job %s", job.Task.ID)
	})
	plan := planOf(
		task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"),
		task("T2", "Sub", []string{"calc/sub.go"}, "calc/sub_test.go"),
		task("T3", "Neg", []string{"calc/neg.go"}, "calc/neg_test.go"),
		task("T4", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go"),
		task("T5", "One", []string{"calc/one.go"}, ""),
		task("T6", "Two", []string{"calc/two.go"}, ""),
	)
	p := newTestPipeline(t, dir, w, plan)
	p.Workers = 6
	p.WorkerTimeout = time.Second
	p.Secrets = proc.NewRedactor([]string{"API_TOKEN=" + secret}, nil)
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunCompleted, status, logText(res.State))

	errOf := func(id string) string {
		a, ok := res.State.Attempts.Get(id + "/1")
		require.True(t, ok)
		require.Empty(t, a.Integrated)
		return a.Error
	}
	require.Equal(t, "worker: the model said nonsense", errOf("T1"))
	require.Equal(t, "worker: claude: exit status 1: no credits", errOf("T2"))
	require.Equal(t, "worker: timed out after 1s (worker.timeout)", errOf("T3"))
	require.Equal(t, "the attempt's changes contain the value of API_TOKEN; a secret must never be committed, so they were discarded", errOf("T4"))
	require.Contains(t, logText(res.State), "T4 attempt 1: worker finished (done); its changes held a secret and were discarded")
	require.Contains(t, errOf("T5"), "the attempt's worktree was broken while the worker ran")
	require.Contains(t, errOf("T6"), "worker: ")
	require.Contains(t, errOf("T6"), "hook post-commit was created")
	_, err := os.Stat(filepath.Join(dir, ".git", "hooks", "post-commit"))
	require.ErrorIs(t, err, os.ErrNotExist, "the hook the worker wrote was taken out")

	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("T%d", i)
		require.Contains(t, files.job(t, id, 2).PreviousError, errOf(id)[:10], id)
		require.Equal(t, planner.StatusCompleted, taskStatus(t, res.State, id))
	}
	require.Len(t, trailers(t, dir), 6)
	require.NotContains(t, gitT(t, dir, "log", "-p", "--all"), secret)
	require.Contains(t, logText(res.State), "T1 failed attempt 1 of 3; retrying: worker: the model said nonsense")
}

// A question and a provider that kept failing cost no attempt: the task
// pauses, pending, for review, and the run goes on after it.
func TestImplementQuestionAndProviderPause(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{
		script: map[string]map[string]string{
			"T1/2": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
			"T2/1": {"calc/sub.go": subGo, "calc/sub_test.go": subTestGo},
		},
		outcome: map[string]agent.Outcome{
			"T1/1": {Status: agent.OutcomeQuestion, Question: "int or float?"},
			"T2/1": {Status: agent.OutcomeProvider, Detail: "anthropic: 529 overloaded\nretried 5 times"},
		},
	}
	plan := planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"), task("T2", "Sub", []string{"calc/sub.go"}, "calc/sub_test.go"))
	p := newTestPipeline(t, dir, w, plan)
	p.Workers = 2
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunPaused, status)
	reasons := map[string]string{}
	for _, p := range payloads(t, res) {
		reasons[p.TaskID] = p.Reason + ": " + p.Error
		require.Zero(t, p.Attempts, "no attempt counted")
	}
	require.Equal(t, map[string]string{"T1": "question: int or float?", "T2": "provider: anthropic: 529 overloaded\nretried 5 times"}, reasons)
	for _, id := range []string{"T1", "T2"} {
		require.Equal(t, planner.StatusPending, taskStatus(t, res.State, id))
	}
	require.Empty(t, h.eventsOf(EventTaskVerified), "no verdict for an attempt that asked or could not run")
	require.Equal(t, []string{"T1 question", "T2 provider"}, h.eventsOf(EventTaskEscalated))
	log := logText(res.State)
	require.Contains(t, log, "T1: the worker asks: int or float?")
	require.Contains(t, log, "T2: paused, the model provider failed: anthropic: 529 overloaded")
	require.Equal(t, 2, CurrentAttempt(res.State, "T1"))
	// The reviewer sees what the paused attempt wrote.
	a, ok := res.State.Attempts.Get("T2/1")
	require.True(t, ok)
	require.True(t, a.Changed)
	require.Contains(t, a.Diff, "calc/sub.go")

	res, status = h.review(res, func(p EscalationPayload) Decision {
		if p.TaskID == "T1" {
			return Decision{Action: ActionRetry, Note: "int"}
		}
		return Decision{Action: ActionRetry}
	})
	require.Equal(t, RunCompleted, status, logText(res.State))
	require.Contains(t, w.job(t, "T1", 2).Task.ImplementationNotes, "int")
	// The attempt the provider stopped went on, in its worktree: the
	// worker was called again for it, not restarted.
	require.ElementsMatch(t, []string{"run-1/T1/2", "run-1/T2/1"}, trailers(t, dir))
	var t2 []agent.Job
	for _, j := range w.jobs {
		if j.Task.ID == "T2" {
			t2 = append(t2, j)
		}
	}
	require.Len(t, t2, 2)
	require.Equal(t, []int{1, 1}, []int{t2[0].Attempt, t2[1].Attempt})
	require.True(t, t2[0].Restart)
	require.False(t, t2[1].Restart, "T2's attempt went on with its conversation")
}

// A worker that changes nothing while the tests pass completes its task
// with nothing to integrate.
func TestImplementNoChange(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, map[string]string{"calc/add.go": addGo, "calc/add_test.go": addTestGo})
	w := &fileWorker{}
	h := newHarness(t, dir, newTestPipeline(t, dir, w, planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"))), storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunCompleted, status)
	require.Empty(t, trailers(t, dir))
	require.Equal(t, []string{"T1"}, NoChangeTasks(res.State))
	require.Equal(t, FateNoChange, Fates(res.State)[0].Fate)
	log := logText(res.State)
	require.Contains(t, log, "T1 attempt 1: worker finished (done); it changed nothing")
	require.Contains(t, log, "T1 passed its tests without changes (no_change: true); nothing to integrate")
}

// When main moves under an attempt so that it no longer applies, the
// attempt fails with the conflicting files and is redone on the new main;
// out of attempts, it is escalated as a conflict.
// A try whose integration conflicts with main is redone on the new main
// without counting against max_attempts, up to freeConflicts times; a
// conflict beyond that counts, and can escalate.
func TestIntegrateConflict(t *testing.T) {
	t.Parallel()
	for _, always := range []bool{false, true} {
		t.Run(fmt.Sprintf("user_commits_always=%v", always), func(t *testing.T) {
			t.Parallel()
			dir := newTestRepo(t, nil)
			calc := "// Package calc adds.\npackage calc\n\n" + strings.TrimPrefix(addGo, "package calc\n\n")
			w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/calc.go": calc, "calc/add_test.go": addTestGo}}}
			t1 := task("T1", "Add", nil, "calc/add_test.go")
			t1.FilesToModify = []string{"calc/calc.go"}
			p := newTestPipeline(t, dir, w, planOf(t1))
			p.MaxAttempts = 1
			commits := 0
			p.CrashFunc = func(point string) {
				if point == "integrate:before" && (always || commits == 0) {
					// The user commits on main meanwhile.
					commits++
					testkit.WriteFiles(t, dir, map[string]string{"calc/calc.go": fmt.Sprintf("// Package calc is the user's (%d).\npackage calc\n", commits)})
					gitT(t, dir, "commit", "-q", "-am", "user change")
				}
			}
			h := newHarness(t, dir, p, storetest.NewMemory(t))
			res, status := h.start()
			first, _ := res.State.Attempts.Get("T1/1")
			require.Equal(t, []string{"calc/calc.go"}, first.Conflicts)
			require.Contains(t, first.Error, "merge conflict with main in calc/calc.go")
			require.Contains(t, logText(res.State), "T1 attempt 1 conflicts with main in calc/calc.go; redone on the new main (not counted against max_attempts)")
			// --json says so too: the try passed its tests, then did not
			// make it onto main.
			require.Equal(t, []string{"T1/1 passed=true", "T1/1 passed=false"}, h.eventsOf(EventTaskVerified)[:2])
			if always {
				require.Equal(t, RunPaused, status)
				ps := payloads(t, res)
				require.Len(t, ps, 1)
				require.Equal(t, ReasonConflict, ps[0].Reason)
				require.Equal(t, "refs/taskloom/attempts/run-1/T1/3", ps[0].Ref)
				require.Empty(t, trailers(t, dir))
				return
			}
			require.Equal(t, RunCompleted, status, logText(res.State))
			require.Equal(t, []string{"run-1/T1/2"}, trailers(t, dir))
			require.Equal(t, calc, showFile(t, dir, "main", "calc/calc.go"))
			require.Contains(t, gitT(t, dir, "log", "--format=%s", "main"), "user change")
		})
	}
}

// The built-in agent, playing a scripted model, implements a task: its
// conversation is stored in the run's histories, its tool and model calls
// and the tests are reported as the attempt's activity, and its usage is
// the attempt's.
func TestImplementWithTheScriptedAgent(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	script, err := llm.ParseScript([]byte(`{"conversations": [{
		"match": "Task: T1 [\\s\\S]*Attempt: 1 of 3",
		"replies": [
			{"content": "Writing Add.", "tool_calls": [
				{"name": "write_to_file", "arguments": {"path": "calc/add.go", "content": ` + jsonString(addGo) + `}},
				{"name": "write_to_file", "arguments": {"path": "calc/add_test.go", "content": ` + jsonString(addTestGo) + `}}
			]},
			{"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "Add adds."}}]}
		]}]}`))
	require.NoError(t, err)
	d := storetest.NewSQLite(t)
	st, err := NewStore(d)
	require.NoError(t, err)
	a, err := agent.New(llm.NewScripted(script), st.Histories(testRunID), nil)
	require.NoError(t, err)
	p := newTestPipeline(t, dir, agent.NewAgentWorker(a, nil), planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go")))
	h := newHarness(t, dir, p, d)

	var mu sync.Mutex
	var acts []string
	ctx := WithActivityFunc(context.Background(), func(a Activity) {
		mu.Lock()
		defer mu.Unlock()
		acts = append(acts, fmt.Sprintf("%s/%d %s", a.TaskID, a.Attempt, a.Tool))
	})
	res, err := h.runner.Start(ctx, Run{ID: testRunID, Repo: dir}, h.opts())
	require.NoError(t, err)
	require.Equal(t, RunCompleted, h.status(), logText(res.State))
	require.Equal(t, addGo, showFile(t, dir, "main", "calc/add.go"))
	rec, _ := res.State.Attempts.Get("T1/1")
	require.Equal(t, "run-1/T1/1", rec.ConversationID)
	require.Equal(t, "Add adds.", rec.Worker)
	require.Positive(t, rec.InputTokens)
	ids, err := st.Conversations(context.Background(), testRunID, "T1")
	require.NoError(t, err)
	require.Equal(t, []string{"run-1/T1/1"}, ids)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "T1/1 worker", acts[0])
	require.Contains(t, acts, "T1/1 write_to_file")
	require.Contains(t, acts, "T1/1 model")
	require.Equal(t, "T1/1 "+ActivityTests, acts[len(acts)-1])
}

func jsonString(s string) string {
	return fmt.Sprintf("%q", s)
}

// A worker that stopped short (a Ralph loop that stagnated) and left its
// tests failing: the try's error says why it stopped before what it left
// undone.
func TestWhyTheWorkerStoppedLeadsTheError(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/add.go": addGo}},
		outcome: map[string]agent.Outcome{"T1/1": {Status: agent.OutcomeBlocked, Detail: "stagnating: 3 iterations in a row changed nothing"}}}
	p := newTestPipeline(t, dir, w, planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go")))
	p.MaxAttempts = 1
	res, status := newHarness(t, dir, p, storetest.NewMemory(t)).start()
	ps := []EscalationPayload{pausedFor(t, res, status, "T1", ReasonMaxAttempts)}
	require.True(t, strings.HasPrefix(ps[0].Error, "the worker stopped: blocked: stagnating: 3 iterations in a row changed nothing\n"), ps[0].Error)
	require.Contains(t, ps[0].Error, "missing files (files_to_create, test_files): calc/add_test.go")
}

// A store that stays away past database.retry_for while the worker saves
// its conversation costs the task no attempt: the run stops, and its
// resume goes on with the same attempt.
func TestStoreOutageCostsNoAttempt(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	files := &fileWorker{script: map[string]map[string]string{"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo}}}
	calls := 0
	w := agent.WorkerFunc(func(ctx context.Context, job agent.Job) (agent.Outcome, error) {
		calls++
		if calls == 1 {
			down := &checkpoint.UnreachableError{Store: "postgres://db", For: 10 * time.Second, Err: errors.New("connection refused")}
			return agent.Outcome{Status: agent.OutcomeIncomplete}, fmt.Errorf("agent worker: persist conversation c1: %w", down)
		}
		return files.Implement(ctx, job)
	})
	p := newTestPipeline(t, dir, w, planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go")))
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	ctx := context.Background()
	_, err := h.runner.Start(ctx, Run{ID: p.RunID, Repo: dir}, h.opts())
	require.ErrorIs(t, err, checkpoint.ErrStoreUnreachable)
	res, err := h.runner.Resume(ctx, p.RunID, h.opts())
	require.NoError(t, err)
	require.Equal(t, RunCompleted, h.status(), logText(res.State))
	require.Equal(t, []string{"run-1/T1/1"}, trailers(t, dir), "the outage spent no attempt")
}
