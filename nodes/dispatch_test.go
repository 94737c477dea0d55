package nodes

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/store/storetest"
	"github.com/taskloom/taskloom/worktree"
)

// dispatcherFunc is a Dispatcher that hands each attempt to a function:
// the queue, without the queue.
type dispatcherFunc func(ctx context.Context, job AttemptJob, progress func(Activity)) (AttemptResult, error)

func (f dispatcherFunc) Dispatch(ctx context.Context, job AttemptJob, progress func(Activity)) (AttemptResult, error) {
	return f(ctx, job, progress)
}

// Attempts dispatched to a worker "on another machine" (its own clone of
// a shared bare remote) come back through the remote: the run fetches
// each commit, verifies it and integrates it once. The second task's base
// is the first one's integration, which the worker fetches from the
// remote. A dispatch the queue gave up on fails its attempt, which is
// retried.
func TestDispatchToAWorkerElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, bare, elsewhere, workerRepo := machines(t)
	w := &fileWorker{script: map[string]map[string]string{
		"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
		"T2": {"calc/sub.go": subGo, "calc/sub_test.go": subTestGo},
	}}
	plan := planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"), task("T2", "Sub", []string{"calc/sub.go"}, "calc/sub_test.go", "T1"))
	remoteWorker := &Pipeline{Repo: workerRepo, Worker: w, Remote: bare}

	var mu sync.Mutex
	var progress []string
	p := newTestPipeline(t, dir, w, plan)
	p.Remote = bare
	p.Dispatcher = dispatcherFunc(func(ctx context.Context, job AttemptJob, report func(Activity)) (AttemptResult, error) {
		if job.Task.ID == "T1" && job.Attempt == 1 {
			return AttemptResult{}, errors.New("the job was discarded after 3 errors")
		}
		report(Activity{Tool: "worker", Summary: "picked up"})
		res, err := remoteWorker.Work(ctx, job)
		res.Worker = "elsewhere:42"
		return res, err
	})
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	actx := WithActivityFunc(ctx, func(a Activity) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, a.TaskID+"/"+itoa(a.Attempt)+" "+a.Summary)
	})
	res, err := h.runner.Start(actx, Run{ID: testRunID, Repo: dir}, h.opts())
	require.NoError(t, err)
	require.Equal(t, RunCompleted, h.status(), logText(res.State))

	require.Equal(t, []string{"run-1/T1/2", "run-1/T2/1"}, trailers(t, dir))
	require.Equal(t, subGo, showFile(t, dir, "main", "calc/sub.go"))
	failed, _ := res.State.Attempts.Get("T1/1")
	require.Equal(t, "worker: the job was discarded after 3 errors", failed.Error)
	log := logText(res.State)
	require.Contains(t, log, "T1 attempt 2: worker finished (done) on elsewhere:42")
	// The worker leaves no worktree behind in its clone; the run, once
	// ended, leaves none of the refs it shared on the remote.
	for _, l := range splitLines(gitT(t, elsewhere, "worktree", "list")) {
		require.NotContains(t, l, "run-1", "an attempt's worktree is left in the worker's clone")
	}
	require.Empty(t, gitT(t, bare, "for-each-ref", "refs/taskloom/"))
	require.Empty(t, gitT(t, elsewhere, "for-each-ref", "refs/taskloom/"), "the worker's clone keeps the attempts it pushed")
	mu.Lock()
	require.Contains(t, progress, "T2/1 picked up")
	mu.Unlock()

	// A worker in the run's own repository needs the base there.
	local := &Pipeline{Repo: h.p.Repo, Worker: w}
	_, err = local.Work(ctx, AttemptJob{RunID: testRunID, Task: plan.Tasks[0], Attempt: 9, Base: "0123456789abcdef0123456789abcdef01234567"})
	require.ErrorContains(t, err, "its base 0123456789 is not in this repository")
}

// machines makes the run's repository dir, the remote bare that it shares
// with workers, and a worker's clone of it elsewhere.
func machines(t *testing.T) (dir, bare, elsewhere string, workerRepo *worktree.Manager) {
	dir = newTestRepo(t, nil)
	bare = filepath.Join(t.TempDir(), "shared.git")
	gitT(t, dir, "clone", "-q", "--bare", dir, bare)
	elsewhere = filepath.Join(t.TempDir(), "worker")
	gitT(t, dir, "clone", "-q", bare, elsewhere)
	workerRepo, err := worktree.Open(context.Background(), elsewhere, nil)
	require.NoError(t, err)
	return dir, bare, elsewhere, workerRepo
}

func splitLines(s string) []string {
	return strings.Split(strings.TrimSpace(s), "\n")
}

// A worker whose remote is not the run's (a fork shares the history, not
// the refs) refuses the attempt before working on it; one whose commit
// did not reach the run's remote fails its attempt, which is retried,
// rather than stopping the run at every resume.
func TestDispatchToAWorkerWithAnotherRemote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, bare, _, workerRepo := machines(t)
	fork := filepath.Join(t.TempDir(), "fork.git")
	gitT(t, dir, "clone", "-q", "--bare", bare, fork)
	w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo}}}
	plan := planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"))
	good := &Pipeline{Repo: workerRepo, Worker: w, Remote: bare}
	forked := &Pipeline{Repo: workerRepo, Worker: w, Remote: fork}

	p := newTestPipeline(t, dir, w, plan)
	p.Remote = bare
	var forkErr error
	p.Dispatcher = dispatcherFunc(func(ctx context.Context, job AttemptJob, _ func(Activity)) (AttemptResult, error) {
		if job.Attempt == 1 {
			_, forkErr = forked.Work(ctx, job)
			// A worker that pushed where the run does not look.
			res, err := good.Work(ctx, job)
			gitT(t, bare, "update-ref", "-d", worktree.AttemptRef(job.RunID, job.Task.ID, job.Attempt))
			res.Worker = "fork:1"
			return res, err
		}
		return good.Work(ctx, job)
	})
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, err := h.runner.Start(ctx, Run{ID: testRunID, Repo: dir}, h.opts())
	require.NoError(t, err)
	require.Equal(t, RunCompleted, h.status(), logText(res.State))
	require.Equal(t, []string{"run-1/T1/2"}, trailers(t, dir))

	require.ErrorContains(t, forkErr, `the run's base ref is not on this clone's remote "`+fork+`"`)
	lost, _ := res.State.Attempts.Get("T1/1")
	require.Contains(t, lost.Error, "worker: the worker fork:1 pushed the attempt's commit, but not to the run's remote")
}
