package nodes

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store/storetest"
)

// escalatedRun runs T1 (Mul), whose attempts all fail, and T2, which
// depends on it, until T1 is escalated after max_attempts 2. attempt3 is
// what T1's third attempt writes, after a review's retry.
func escalatedRun(t *testing.T, attempt3 map[string]string) (*harness, *fileWorker, graph.Result[State]) {
	t.Helper()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{
		"T1":   {"calc/mul.go": mulWrongGo, "calc/mul_test.go": mulTestGo},
		"T1/3": attempt3,
		"T2":   {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
	}}
	plan := planOf(
		task("T1", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go"),
		task("T2", "Add", []string{"calc/add.go"}, "calc/add_test.go", "T1"),
	)
	p := newTestPipeline(t, dir, w, plan)
	p.MaxAttempts = 2
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()

	require.Equal(t, graph.StatusInterrupted, res.Status)
	require.Equal(t, RunPaused, status)
	require.Equal(t, 3, ExitCode(status))
	ps := payloads(t, res)
	require.Len(t, ps, 1)
	p0 := ps[0]
	require.Equal(t, "T1", p0.TaskID)
	require.Equal(t, "Mul", p0.Title)
	require.Equal(t, ReasonMaxAttempts, p0.Reason)
	require.Equal(t, 2, p0.Attempts)
	require.Equal(t, "T1/2", p0.Attempt)
	require.Contains(t, p0.Error, "TestMul")
	// The reviewer can look at the last attempt's work by its ref.
	require.Equal(t, "refs/taskloom/attempts/run-1/T1/2", p0.Ref)
	require.Equal(t, mulWrongGo, showFile(t, dir, p0.Ref, "calc/mul.go"))
	require.Equal(t, []string{"T1 max_attempts"}, h.eventsOf(EventTaskEscalated))
	require.Equal(t, []string{"T1/1 passed=false", "T1/2 passed=false"}, h.eventsOf(EventTaskVerified))
	require.Empty(t, trailers(t, dir), "nothing failing is integrated")
	require.Contains(t, logText(res.State), "T1 failed attempt 2 of 2; escalating to a human")
	return h, w, res
}

func TestReviewRetryWithANote(t *testing.T) {
	t.Parallel()
	h, w, res := escalatedRun(t, map[string]string{"calc/mul.go": mulGo, "calc/mul_test.go": mulTestGo})
	res, status := h.review(res, func(EscalationPayload) Decision {
		return Decision{Action: ActionRetry, Note: "multiply, do not add"}
	})
	require.Equal(t, RunCompleted, status)
	require.Equal(t, 0, ExitCode(status))
	// The retry goes on counting attempts, and its worker sees the note.
	job := w.job(t, "T1", 3)
	require.Contains(t, job.Task.ImplementationNotes, "multiply, do not add")
	require.Equal(t, 0, job.Task.Attempts, "a review's retry gives fresh attempts")
	require.Equal(t, []string{"run-1/T1/3", "run-1/T2/1"}, trailers(t, h.dir))
	require.Contains(t, logText(res.State), "review: retry T1: multiply, do not add")
	require.Contains(t, logText(res.State), "started T1 (attempt 3, 1 of max_attempts 2)")
	require.Empty(t, gitT(t, h.dir, "for-each-ref", "refs/taskloom/"), "the kept ref goes when the run ends")
}

func TestReviewSkipBlocksDependents(t *testing.T) {
	t.Parallel()
	h, _, res := escalatedRun(t, nil)
	res, status := h.review(res, func(EscalationPayload) Decision { return Decision{Action: ActionSkip} })
	require.Equal(t, RunPartial, status)
	require.Equal(t, 5, ExitCode(status))
	require.Equal(t, planner.StatusSkipped, taskStatus(t, res.State, "T1"))
	require.Equal(t, planner.StatusBlocked, taskStatus(t, res.State, "T2"))
	fates := Fates(res.State)
	require.Equal(t, "skipped", fates[0].String())
	require.Equal(t, "blocked by T1 (skipped)", fates[1].String())
	require.Empty(t, trailers(t, h.dir))
}

func TestReviewFixedCompletesTheTask(t *testing.T) {
	t.Parallel()
	h, w, res := escalatedRun(t, nil)
	res, status := h.review(res, func(EscalationPayload) Decision { return Decision{Action: ActionFixed} })
	require.Equal(t, RunCompleted, status)
	require.Equal(t, planner.StatusCompleted, taskStatus(t, res.State, "T1"))
	require.Equal(t, []string{"run-1/T2/1"}, trailers(t, h.dir), "a task fixed by hand is not integrated")
	require.Len(t, w.jobs, 3, "T1 twice, then T2")
	require.Equal(t, "fixed by hand", Fates(res.State)[0].String(), "not \"no change\": its tries failed")
	require.Empty(t, NoChangeTasks(res.State))
}

func TestReviewAbortEndsTheRun(t *testing.T) {
	t.Parallel()
	h, _, res := escalatedRun(t, nil)
	res, status := h.review(res, func(EscalationPayload) Decision { return Decision{Action: ActionAbort} })
	require.Equal(t, graph.StatusDone, res.Status)
	require.Equal(t, RunAborted, status)
	require.Equal(t, 4, ExitCode(status))
	require.Equal(t, OutcomeAborted, res.State.Outcome.Get())
	require.Contains(t, logText(res.State), "review: abort the run")
	require.Equal(t, planner.StatusFailed, taskStatus(t, res.State, "T1"))
	require.Equal(t, planner.StatusBlocked, taskStatus(t, res.State, "T2"))
	require.Equal(t, FateFailed, Fates(res.State)[0].Fate)
	require.Contains(t, Fates(res.State)[0].String(), "failed: ")
}

func TestReviewUnknownActionStopsTheRun(t *testing.T) {
	t.Parallel()
	h, _, res := escalatedRun(t, nil)
	g, err := h.runner.Runnable()
	require.NoError(t, err)
	require.NoError(t, g.Answer(context.Background(), testRunID, map[string]any{res.Interrupts[0].ID: Decision{Action: "shrug"}}))
	_, err = h.runner.Resume(context.Background(), testRunID, nil)
	require.ErrorContains(t, err, `review of T1: unknown action "shrug"`)
	require.Equal(t, RunInterrupted, h.status())
}

func TestApplyDecision(t *testing.T) {
	t.Parallel()
	tasks := []planner.Task{{ID: "T1", Status: planner.StatusFailed, Attempts: 3, MaxAttempts: 3, Error: "boom"}, {ID: "T2", Status: planner.StatusBlocked, Dependencies: []string{"T1"}}}
	out, err := ApplyDecision(tasks, "T1", Decision{Action: ActionRetry, Note: "try harder"})
	require.NoError(t, err)
	require.Equal(t, planner.StatusPending, out[0].Status)
	require.Equal(t, 0, out[0].Attempts)
	require.Equal(t, "Reviewer note: try harder", out[0].ImplementationNotes)
	out, err = ApplyDecision(tasks, "T1", Decision{Action: ActionFixed})
	require.NoError(t, err)
	require.Equal(t, planner.StatusCompleted, out[0].Status)
	require.Equal(t, planner.StatusPending, out[1].Status, "a fixed task unblocks its dependents")
	out, err = ApplyDecision(tasks, "T1", Decision{Action: ActionSkip})
	require.NoError(t, err)
	require.Equal(t, planner.StatusSkipped, out[0].Status)
	out, err = ApplyDecision(tasks, "T1", Decision{Action: ActionAbort})
	require.NoError(t, err)
	require.Equal(t, tasks, out)
	_, err = ApplyDecision(tasks, "T1", Decision{Action: "later"})
	require.ErrorContains(t, err, "want fixed, retry, skip or abort")
	_, err = ApplyDecision(tasks, "T9", Decision{Action: ActionFixed})
	require.Error(t, err)
}

// A plan with a dependency cycle runs the tasks outside it first, then
// escalates each task on it.
func TestBreakdownCycleRunsTheRestFirst(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	t1 := task("T1", "One", []string{"calc/one.go"}, "", "T2")
	t2 := task("T2", "Two", []string{"calc/two.go"}, "", "T1")
	t3 := task("T3", "Three", []string{"calc/three.go"}, "")
	plan := planOf(t1, t2, t3)
	plan.Cycles = [][]string{{"T1", "T2", "T1"}}
	w := &fileWorker{script: map[string]map[string]string{"T3": {"calc/three.go": "package calc\n"}}}
	p := newTestPipeline(t, dir, w, plan)
	p.PlanFunc = func(context.Context) (*planner.Plan, error) {
		return plan, &planner.CycleError{Cycles: plan.Cycles}
	}
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunPaused, status)
	require.Equal(t, []string{testRunID + "/T3/1"}, trailers(t, dir), "T3 ran and was integrated first: %s", logText(res.State))
	var got []string
	for _, p := range payloads(t, res) {
		require.Equal(t, ReasonCycle, p.Reason)
		require.Equal(t, "dependency cycle T1 -> T2 -> T1", p.Error)
		got = append(got, p.TaskID)
	}
	require.Equal(t, []string{"T1", "T2"}, got)
}

// A plan with a dependency cycle and nothing outside it escalates each
// task on it at once.
func TestBreakdownCycleEscalates(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	t1 := task("T1", "One", []string{"calc/one.go"}, "", "T2")
	t2 := task("T2", "Two", []string{"calc/two.go"}, "", "T1")
	plan := planOf(t1, t2)
	plan.Cycles = [][]string{{"T1", "T2", "T1"}}
	p := newTestPipeline(t, dir, &fileWorker{}, plan)
	p.PlanFunc = func(context.Context) (*planner.Plan, error) {
		return plan, &planner.CycleError{Cycles: plan.Cycles}
	}
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunPaused, status)
	var got []string
	for _, p := range payloads(t, res) {
		require.Equal(t, ReasonCycle, p.Reason)
		require.Equal(t, "dependency cycle T1 -> T2 -> T1", p.Error)
		require.Empty(t, p.Ref, "nothing was attempted")
		got = append(got, p.TaskID)
	}
	require.Equal(t, []string{"T1", "T2"}, got)
	require.Equal(t, []string{"T1 cycle", "T2 cycle"}, h.eventsOf(EventTaskEscalated))
	_, status = h.review(res, func(EscalationPayload) Decision { return Decision{Action: ActionAbort} })
	require.Equal(t, RunAborted, status)
}

// A plan that cannot be made stops the run, resumable once it is fixed:
// the run has not ended.
func TestBreakdownErrorStopsTheRun(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	p := newTestPipeline(t, dir, &fileWorker{}, planOf())
	p.PlanFunc = func(context.Context) (*planner.Plan, error) { return nil, errors.New("no PRODUCT.md") }
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	_, err := h.runner.Start(context.Background(), Run{ID: testRunID, Repo: dir}, nil)
	require.ErrorContains(t, err, "no PRODUCT.md")
	require.Equal(t, RunInterrupted, h.status())
}

// A task that waits on a task the plan lacks is a deadlock, escalated
// with what it waits on.
func TestSelectDeadlockEscalates(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo}}}
	p := newTestPipeline(t, dir, w, planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go", "T9")))
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunPaused, status)
	ps := payloads(t, res)
	require.Len(t, ps, 1)
	require.Equal(t, ReasonDeadlock, ps[0].Reason)
	require.Contains(t, ps[0].Error, "T9")
	require.Empty(t, w.jobs)
	res, status = h.review(res, func(EscalationPayload) Decision { return Decision{Action: ActionFixed} })
	require.Equal(t, RunCompleted, status)
	require.Contains(t, logText(res.State), "build verification passed on main at ")
}

// A task that escalates does not pause the run before the tasks that do
// not depend on it: they run first, and the run pauses for review once
// nothing else is left, as an unattended run should.
func TestEscalationWaitsForIndependentTasks(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{
		"T1": {"calc/mul.go": mulWrongGo, "calc/mul_test.go": mulTestGo},
		"T2": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
		"T3": {"calc/sub.go": subGo, "calc/sub_test.go": subTestGo},
	}}
	p := newTestPipeline(t, dir, w, planOf(
		task("T1", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go"),
		task("T2", "Add", []string{"calc/add.go"}, "calc/add_test.go"),
		task("T3", "Sub", []string{"calc/sub.go"}, "calc/sub_test.go", "T1"),
	))
	p.MaxAttempts = 2
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunPaused, status, logText(res.State))
	require.Equal(t, planner.StatusCompleted, taskStatus(t, res.State, "T2"), "T2 ran before the pause")
	require.Equal(t, planner.StatusBlocked, taskStatus(t, res.State, "T3"), "T3 waits on T1's review")
	require.Equal(t, []string{"run-1/T2/1"}, trailers(t, dir))
	ps := payloads(t, res)
	require.Len(t, ps, 1)
	require.Equal(t, "T1", ps[0].TaskID)

	res, status = h.review(res, func(EscalationPayload) Decision { return Decision{Action: ActionSkip} })
	require.Equal(t, RunPartial, status)
	require.Equal(t, planner.StatusBlocked, taskStatus(t, res.State, "T3"))
}

// Escalations wait together: one from an earlier batch is still there,
// and still reviewable, when a later batch escalates another task, and a
// task that asked a question is not run again before its review, even
// after a failed attempt and with one worker.
func TestEscalationsOfSeveralBatchesWaitTogether(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{
		script: map[string]map[string]string{
			"T1": {"calc/mul.go": mulWrongGo, "calc/mul_test.go": mulTestGo},
			"T2": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
			"T3": {"calc/sub.go": "package calc\n\nfunc Sub(a, b int) int { return a + b }\n", "calc/sub_test.go": subTestGo},
		},
		outcome: map[string]agent.Outcome{"T1/2": {Status: agent.OutcomeQuestion, Question: "int or float?"}},
	}
	p := newTestPipeline(t, dir, w, planOf(
		task("T1", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go"),
		task("T2", "Add", []string{"calc/add.go"}, "calc/add_test.go"),
		task("T3", "Sub", []string{"calc/sub.go"}, "calc/sub_test.go"),
	))
	p.MaxAttempts = 2
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunPaused, status, logText(res.State))
	reasons := map[string]string{}
	for _, pl := range payloads(t, res) {
		reasons[pl.TaskID] = pl.Reason
	}
	require.Equal(t, map[string]string{"T1": ReasonQuestion, "T3": ReasonMaxAttempts}, reasons, "both wait for review")
	require.Equal(t, []string{"T1 question", "T3 max_attempts"}, h.eventsOf(EventTaskEscalated), "each reported once")
	jobs := map[string]int{}
	for _, j := range w.jobs {
		jobs[j.Task.ID]++
	}
	require.Equal(t, map[string]int{"T1": 2, "T2": 1, "T3": 2}, jobs, "T1 asked on its second attempt and ran no more")
	require.Equal(t, planner.StatusCompleted, taskStatus(t, res.State, "T2"))

	res, status = h.review(res, func(pl EscalationPayload) Decision { return Decision{Action: ActionSkip} })
	require.Equal(t, RunPartial, status, logText(res.State))
}
