package nodes

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store/sqlite"
)

// fakeSync is an issue tracker whose issues appear when the run waits
// for it (Drain), as a background sync's would; while down none do.
type fakeSync struct {
	mu      sync.Mutex
	down    bool
	issues  map[string]string
	pending map[string]bool
	seen    []string // "TASK status", in order
}

func newFakeSync() *fakeSync {
	return &fakeSync{issues: map[string]string{}, pending: map[string]bool{}}
}

func (f *fakeSync) Tasks(runID string, tasks []planner.Task) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range tasks {
		f.seen = append(f.seen, t.ID+" "+string(t.Status))
		f.pending[runID+"/"+t.ID] = true
	}
}

func (f *fakeSync) Drain(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil
	}
	for k := range f.pending {
		_, task, _ := strings.Cut(k, "/")
		f.issues[k] = "ISSUE-" + task
	}
	clear(f.pending)
	return nil
}

func (f *fakeSync) IssueID(runID, taskID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issues[runID+"/"+taskID]
}

func syncHarness(t *testing.T, f *fakeSync) *harness {
	t.Helper()
	dir := newTestRepo(t, nil)
	d, err := sqlite.Open(context.Background(), t.TempDir()+"/s.db", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	w := &fileWorker{script: map[string]map[string]string{
		"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
		"T2": {"calc/mul.go": mulGo, "calc/mul_test.go": mulTestGo},
	}}
	plan := planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"),
		task("T2", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go", "T1"))
	h := newHarness(t, dir, newTestPipeline(t, dir, w, plan), d)
	h.runner.Sync = f
	return h
}

// The issue IDs the sync finds are recorded on the tasks: by select_task
// during the run, and at its end for those found after the last one.
func TestIssueIDsRecordedOnTasks(t *testing.T) {
	t.Parallel()
	f := newFakeSync()
	h := syncHarness(t, f)
	// T1's issue exists from the start; T2's appears when the run waits
	// for the sync at its end, after the last select_task.
	f.issues[testRunID+"/T1"] = "ISSUE-T1"
	res, status := h.start()
	require.Equal(t, RunCompleted, status)
	head := headOf(t, h)
	for _, id := range []string{"T1", "T2"} {
		tk, _ := head.State.Tasks.Get(id)
		require.Equal(t, "ISSUE-"+id, tk.LinearIssueID, id)
	}
	// The run's own last state has T1's but not T2's: the end recorded
	// T2's in a checkpoint of its own.
	t1, _ := res.State.Tasks.Get("T1")
	t2, _ := res.State.Tasks.Get("T2")
	require.Equal(t, "ISSUE-T1", t1.LinearIssueID, "select_task recorded it")
	require.Empty(t, t2.LinearIssueID)
	g, err := h.runner.Runnable()
	require.NoError(t, err)
	hist, err := g.History(context.Background(), testRunID, 1)
	require.NoError(t, err)
	require.Equal(t, "update", hist[0].Source)
	require.Equal(t, head.Step, res.Step+1)
	require.Empty(t, head.Next, "the update leaves the run ended")
}

// A run that ended while the tracker was down catches up without running
// anything: every task is handed on, and the IDs are recorded.
func TestCatchUpOfAnEndedRun(t *testing.T) {
	t.Parallel()
	f := newFakeSync()
	f.down = true
	h := syncHarness(t, f)
	_, status := h.start()
	require.Equal(t, RunCompleted, status)
	ctx := context.Background()
	for _, tk := range headOf(t, h).State.Tasks.Values() {
		require.Empty(t, tk.LinearIssueID, tk.ID)
	}

	f.mu.Lock()
	f.down, f.seen = false, nil
	f.mu.Unlock()
	require.NoError(t, h.runner.CatchUp(ctx, testRunID, time.Second))
	require.ElementsMatch(t, []string{"T1 completed", "T2 completed"}, f.seen)
	after := headOf(t, h)
	for _, tk := range after.State.Tasks.Values() {
		require.Equal(t, "ISSUE-"+tk.ID, tk.LinearIssueID, tk.ID)
	}
	require.Empty(t, after.Next)

	// Nothing new: no checkpoint.
	require.NoError(t, h.runner.CatchUp(ctx, testRunID, time.Second))
	require.Equal(t, after.Step, headOf(t, h).Step)
}

func headOf(t *testing.T, h *harness) graph.Result[State] {
	t.Helper()
	g, err := h.runner.Runnable()
	require.NoError(t, err)
	st, err := g.State(context.Background(), testRunID, -1)
	require.NoError(t, err)
	return st
}
