package nodes

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store/storetest"
)

// A failing attempt is retried with its failing tests as the error, and
// each passing attempt is integrated exactly once, by its trailer.
func TestPipelineRetryWithTheFailureThenIntegrateOnce(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{
		"T1":   {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
		"T2/1": {"calc/mul.go": mulWrongGo, "calc/mul_test.go": mulTestGo},
		"T2/2": {"calc/mul.go": mulGo, "calc/mul_test.go": mulTestGo},
	}}
	plan := planOf(
		task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"),
		task("T2", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go", "T1"),
	)
	h := newHarness(t, dir, newTestPipeline(t, dir, w, plan), storetest.NewMemory(t))
	res, status := h.start()

	require.Equal(t, graph.StatusDone, res.Status)
	require.Equal(t, RunCompleted, status)
	require.Equal(t, OutcomeCompleted, res.State.Outcome.Get())
	require.Equal(t, []string{"run-1/T1/1", "run-1/T2/2"}, trailers(t, dir), "each passing attempt integrated once, the failed one never")
	require.Equal(t, mulGo, showFile(t, dir, "main", "calc/mul.go"))
	require.Equal(t, addGo, showFile(t, dir, "main", "calc/add.go"))

	// The retry was told why the first attempt failed.
	retry := w.job(t, "T2", 2)
	require.Contains(t, retry.PreviousError, "TestMul")
	require.Contains(t, retry.PreviousError, "Mul(3, 4) = 7, want 12")
	first, ok := res.State.Attempts.Get("T2/1")
	require.True(t, ok)
	require.False(t, first.Verified)
	require.Empty(t, first.Integrated)
	require.Contains(t, first.Diff, "calc/mul.go", "a failed attempt keeps its diff for the reviewer")
	second, _ := res.State.Attempts.Get("T2/2")
	require.Equal(t, gitT(t, dir, "rev-parse", "main"), second.Integrated)
	require.Equal(t, second.Integrated, res.State.Head.Get())

	require.Equal(t, []string{"T1/1 passed=true", "T2/1 passed=false", "T2/2 passed=true"}, h.eventsOf(EventTaskVerified))
	require.Equal(t, []string{"T1/1", "T2/2"}, h.eventsOf(EventTaskIntegrated))
	require.Equal(t, []string{"T1/1 worker 1", "T2/1 worker 1", "T2/2 worker 1"}, h.eventsOf(EventTaskStarted))
	require.Empty(t, h.eventsOf(EventTaskEscalated))
	h.mu.Lock()
	planned := h.events[0]
	h.mu.Unlock()
	require.Equal(t, EventPlanReady, planned.Type)
	require.Equal(t, []PlannedTask{{ID: "T1", Title: "Add", Dependencies: []string{}, Minutes: 2}, {ID: "T2", Title: "Mul", Dependencies: []string{"T1"}, Minutes: 2}}, planned.Tasks)
	// The retry went from integrate straight back to implement_task.
	require.Contains(t, strings.Join(h.nodes, " "), NodeIntegrate+" "+NodeImplement+" "+NodeVerify)

	log := logText(res.State)
	require.Contains(t, log, "planned 2 tasks in 1 milestone")
	require.Contains(t, log, "T2 failed attempt 1 of 3; retrying")
	require.Contains(t, log, "T2 passed its tests (go test: 2 tests, 0 skipped)", "the suite's run of the task's tests does not count them twice")
	require.Contains(t, log, "T1 passed its tests (go test: 1 test, 0 skipped)")
	require.Contains(t, log, "build verification passed on main (its head", "a lone fast-forward was tested on that very tree")

	fates := Fates(res.State)
	require.Len(t, fates, 2)
	for _, f := range fates {
		require.Equal(t, FateIntegrated, f.Fate, f.TaskID)
	}
	require.Equal(t, 2, fates[1].Attempts)
	require.Equal(t, 300, RunUsage(res.State).InputTokens, "three attempts of 100 input tokens")

	// The run leaves only the main checkout and no kept refs.
	require.Len(t, strings.Split(gitT(t, dir, "worktree", "list", "--porcelain"), "\n\n"), 1)
	require.Empty(t, gitT(t, dir, "for-each-ref", "refs/taskloom/"))
	require.Equal(t, planner.StatusCompleted, taskStatus(t, res.State, "T2"))
}
