package queue_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/queue"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/worktree"
)

// git runs git with a test identity and returns its output without the
// final newline.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(testkit.Git(t, dir, args...))
}

// repos makes a bare remote and two clones of it: the run's and a
// worker's.
func repos(t testing.TB) (remote, run, worker string) {
	dir := t.TempDir()
	remote, run, worker = filepath.Join(dir, "remote.git"), filepath.Join(dir, "run"), filepath.Join(dir, "worker")
	git(t, dir, "init", "-q", "--bare", "-b", "main", remote)
	git(t, dir, "clone", "-q", remote, run)
	require.NoError(t, os.WriteFile(filepath.Join(run, "README"), []byte("hi\n"), 0o644))
	git(t, run, "add", "README")
	git(t, run, "commit", "-q", "-m", "init")
	git(t, run, "push", "-q", "origin", "HEAD:main")
	git(t, dir, "clone", "-q", remote, worker)
	return remote, run, worker
}

func open(t testing.TB, dir string) *worktree.Manager {
	m, err := worktree.Open(context.Background(), dir, nil)
	require.NoError(t, err)
	return m
}

// newDB returns a store on a new, empty PostgreSQL schema: the queue's
// database.
func newDB(t testing.TB) *postgres.Driver {
	url := checkpointtest.NewEmptyPostgresSchema(t)
	d, err := postgres.Open(context.Background(), url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// writer is a worker that writes one file named after its task.
func writer(started chan<- string) agent.Worker {
	return agent.WorkerFunc(func(ctx context.Context, job agent.Job) (agent.Outcome, error) {
		if started != nil {
			started <- job.Task.ID
		}
		err := os.WriteFile(filepath.Join(job.Worktree, job.Task.ID+".txt"), []byte(job.Task.Title+"\n"), 0o644)
		return agent.Outcome{Status: agent.OutcomeDone, Summary: "wrote " + job.Task.ID}, err
	})
}

func work(p *nodes.Pipeline) func(context.Context, queue.Args) (nodes.AttemptResult, error) {
	return func(ctx context.Context, a queue.Args) (nodes.AttemptResult, error) { return p.Work(ctx, a.Job) }
}

// startWriter starts a worker named name that runs attempts in repo,
// through the shared remote, with the writer worker; it stops when the
// test ends, or when the returned function is called.
func startWriter(t testing.TB, db queue.Store, name string, repo *worktree.Manager, started chan<- string) (stop func()) {
	t.Helper()
	stop, err := queue.Start(context.Background(), db, &queue.WorkOpts{Name: name, Poll: 100 * time.Millisecond,
		Run: work(&nodes.Pipeline{Repo: repo, Worker: writer(started), Remote: "origin"})})
	require.NoError(t, err)
	t.Cleanup(stop)
	return stop
}

func job(t *testing.T, run *worktree.Manager, runID, taskID string) nodes.AttemptJob {
	head, err := run.Head(context.Background())
	require.NoError(t, err)
	require.NoError(t, run.Push(context.Background(), "origin", head, worktree.BaseRef(runID, taskID, 1)))
	return nodes.AttemptJob{RunID: runID, Task: taskOf(taskID), Attempt: 1, Base: head}
}

func taskOf(id string) planner.Task { return planner.Task{ID: id, Title: "task " + id} }

func TestRemoteWorkerRunsAndPushesAnAttempt(t *testing.T) {
	ctx := context.Background()
	remote, runDir, workerDir := repos(t)
	db := newDB(t)
	run, wrk := open(t, runDir), open(t, workerDir)
	startWriter(t, db, "box-b:42", wrk, nil)
	// The worker counts among the run's slots; another run's own workers
	// do not.
	other, err := queue.Start(ctx, db, &queue.WorkOpts{Name: "driver:9", RunID: "r9", Concurrency: 3,
		Run: func(context.Context, queue.Args) (nodes.AttemptResult, error) {
			return nodes.AttemptResult{}, queue.ErrElsewhere
		}})
	require.NoError(t, err)
	n, err := queue.Slots(ctx, db, "r1", "")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = queue.Slots(ctx, db, "r9", "")
	require.NoError(t, err)
	require.Equal(t, 4, n)
	other()
	n, err = queue.Slots(ctx, db, "r9", "")
	require.NoError(t, err)
	require.Equal(t, 1, n, "a stopped worker no longer counts")
	d, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Model: "scripted:x", Lease: 5 * time.Second})
	require.NoError(t, err)
	var acts []nodes.Activity
	j := job(t, run, "r1", "T1")
	res, err := d.Dispatch(ctx, j, func(a nodes.Activity) { acts = append(acts, a) })
	require.NoError(t, err)
	require.Equal(t, "box-b:42", res.Worker)
	require.True(t, res.Pushed)
	require.True(t, res.Attempt.Changed)
	require.Equal(t, "done: wrote T1", res.Attempt.WorkerReason+": "+res.Attempt.Worker)
	// The attempt's commit is on the remote, on top of the run's base.
	got := git(t, remote, "rev-parse", worktree.AttemptRef("r1", "T1", 1))
	require.Equal(t, res.Attempt.Commit, got)
	require.Equal(t, j.Base, git(t, remote, "rev-parse", got+"^"))
	require.Equal(t, "task T1", git(t, remote, "show", got+":T1.txt"))
	// The worker's clone keeps no worktree of it.
	_, err = wrk.Get(ctx, "r1", "T1", 1)
	require.ErrorIs(t, err, worktree.ErrNotFound)

	// Asked again (a resumed run), the queue answers from the same job.
	again, err := d.Dispatch(ctx, j, func(nodes.Activity) {})
	require.NoError(t, err)
	require.Equal(t, res.Attempt.Commit, again.Attempt.Commit)
	var jobs int
	require.NoError(t, db.Pool().QueryRow(ctx, `SELECT count(*) FROM river_job`).Scan(&jobs))
	require.Equal(t, 1, jobs)
}

func TestDeadWorkersAttemptGoesToAnother(t *testing.T) {
	ctx := context.Background()
	_, runDir, workerDir := repos(t)
	db := newDB(t)
	run, wrk := open(t, runDir), open(t, workerDir)
	d, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Lease: 2 * time.Second, Poll: 100 * time.Millisecond})
	require.NoError(t, err)
	j := job(t, run, "r2", "T1")

	// A worker took the job and died: the job is running under a lease
	// that nobody renews.
	var id int64
	require.NoError(t, db.Pool().QueryRow(ctx, `SELECT 1`).Scan(new(int)))
	go func() { _, _ = d.Dispatch(ctx, j, func(nodes.Activity) {}) }()
	require.Eventually(t, func() bool {
		return db.Pool().QueryRow(ctx, `SELECT id FROM river_job`).Scan(&id) == nil
	}, 10*time.Second, 50*time.Millisecond)
	_, err = db.Pool().Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(), attempted_by = '{dead}' WHERE id = $1`, id)
	require.NoError(t, err)
	_, err = db.Pool().Exec(ctx, `INSERT INTO attempt_leases (job_id, run_id, task_id, attempt, worker, expires_at) VALUES ($1, 'r2', 'T1', 1, 'box-a:7', now() + interval '1 second')`, id)
	require.NoError(t, err)

	started := make(chan string, 1)
	startWriter(t, db, "box-b:42", wrk, started)
	res, err := d.Dispatch(ctx, j, func(nodes.Activity) {})
	require.NoError(t, err)
	require.Equal(t, "box-b:42", res.Worker)
	require.Equal(t, "T1", <-started)
	var attempt int
	var errs []string
	require.NoError(t, db.Pool().QueryRow(ctx, `SELECT attempt, array(SELECT e->>'error' FROM unnest(errors) e) FROM river_job WHERE id = $1`, id).Scan(&attempt, &errs))
	require.Equal(t, 2, attempt, "River ran the job a second time")
	require.Len(t, errs, 1)
	require.Contains(t, errs[0], "worker box-a:7 stopped renewing its lease")
}

// A worker whose clone cannot reach the remote leaves the attempt to
// another without counting a try of the job's, and rests before it takes
// another: a broken machine does not burn the tasks' attempts.
func TestWorkerThatCannotReachTheRemoteLeavesTheAttemptToAnother(t *testing.T) {
	ctx := context.Background()
	_, runDir, workerDir := repos(t)
	db := newDB(t)
	run, good := open(t, runDir), open(t, workerDir)
	lost := filepath.Join(t.TempDir(), "lost")
	git(t, filepath.Dir(lost), "clone", "-q", runDir, lost)
	git(t, lost, "remote", "set-url", "origin", filepath.Join(t.TempDir(), "gone.git"))
	bad := open(t, lost)
	d, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Lease: 5 * time.Second, Poll: 50 * time.Millisecond})
	require.NoError(t, err)
	// The base is a commit the lost clone lacks: it must fetch it.
	git(t, runDir, "commit", "-q", "--allow-empty", "-m", "moved on")
	j := job(t, run, "r3", "T1")

	logs := &testkit.Buffer{}
	stopBad, err := queue.Start(ctx, db, &queue.WorkOpts{Name: "lost:1", Poll: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Run:    work(&nodes.Pipeline{Repo: bad, Worker: writer(nil), Remote: "origin"})})
	require.NoError(t, err)
	t.Cleanup(stopBad)
	first, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var said []string
	go func() {
		_, _ = d.Dispatch(first, j, func(a nodes.Activity) {
			mu.Lock()
			defer mu.Unlock()
			said = append(said, a.Summary)
		})
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "this worker cannot run attempts") }, 20*time.Second, 100*time.Millisecond)
	// The run says why it waits.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(said, func(s string) bool {
			return strings.HasPrefix(s, "waiting for a worker; lost:1 cannot run it: this worker's clone cannot serve the attempt: ")
		})
	}, 10*time.Second, 100*time.Millisecond, "%q", said)
	require.Contains(t, logs.String(), "fetch refs/taskloom/bases/r3/T1/1 from origin")
	require.Equal(t, 1, strings.Count(logs.String(), "this worker cannot run attempts"), "it rests rather than take the job again")
	startWriter(t, db, "good:2", good, nil)
	res, err := d.Dispatch(ctx, j, func(nodes.Activity) {})
	require.NoError(t, err)
	require.Equal(t, "good:2", res.Worker)
	var tries int
	require.NoError(t, db.Pool().QueryRow(ctx, `SELECT coalesce(array_length(errors, 1), 0) FROM river_job WHERE args->>'run_id' = 'r3'`).Scan(&tries))
	require.Zero(t, tries, "the lost worker's fault counted no try")
	require.Equal(t, 1, strings.Count(logs.String(), "this worker cannot run attempts"))
}

// frozen is a worker's store whose lease renewals hang while the worker is
// frozen, as a laptop asleep or a paused VM would leave them.
type frozen struct {
	*postgres.Driver
	mu   sync.Mutex
	thaw chan struct{} // nil while not frozen
}

func (f *frozen) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.thaw = make(chan struct{})
}

func (f *frozen) unfreeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.thaw)
	f.thaw = nil
}

func (f *frozen) RenewLease(ctx context.Context, job int64, worker string, ttl time.Duration, tool, summary string) (bool, error) {
	f.mu.Lock()
	thaw := f.thaw
	f.mu.Unlock()
	if thaw != nil {
		<-thaw
	}
	return f.Driver.RenewLease(ctx, job, worker, ttl, tool, summary)
}

// A worker frozen past its lease that comes back leaves the attempt to the
// worker that took it over: the attempt ends once, with the other's result,
// and the frozen worker's end costs no try.
func TestFrozenWorkerComesBack(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	d, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Lease: 2 * time.Second, Poll: 50 * time.Millisecond})
	require.NoError(t, err)

	sleepy := &frozen{Driver: db}
	entered, left := make(chan struct{}), make(chan struct{})
	stop, err := queue.Start(ctx, sleepy, &queue.WorkOpts{Name: "sleepy:1", Poll: 100 * time.Millisecond,
		Run: func(ctx context.Context, a queue.Args) (nodes.AttemptResult, error) {
			close(entered)
			<-ctx.Done()
			defer close(left)
			return nodes.AttemptResult{}, context.Cause(ctx)
		}})
	require.NoError(t, err)
	t.Cleanup(stop)
	done := make(chan nodes.AttemptResult, 1)
	go func() {
		res, err := d.Dispatch(ctx, nodes.AttemptJob{RunID: "r5", Task: taskOf("T1"), Attempt: 1}, func(nodes.Activity) {})
		assert.NoError(t, err)
		done <- res
	}()
	<-entered
	sleepy.freeze()

	release, taken := make(chan struct{}), make(chan struct{})
	stop2, err := queue.Start(ctx, db, &queue.WorkOpts{Name: "awake:2", Poll: 100 * time.Millisecond,
		Run: func(ctx context.Context, a queue.Args) (nodes.AttemptResult, error) {
			close(taken)
			<-release
			return nodes.AttemptResult{Note: "done by awake:2"}, nil
		}})
	require.NoError(t, err)
	t.Cleanup(stop2)
	<-taken // the lease lapsed and the run handed the attempt over
	sleepy.unfreeze()
	<-left // the frozen worker found its lease gone
	time.Sleep(500 * time.Millisecond)
	close(release)
	res := <-done
	require.Equal(t, "awake:2", res.Worker)
	require.Equal(t, "done by awake:2", res.Note)

	var state string
	var tries int
	var errs []string
	require.NoError(t, db.Pool().QueryRow(ctx, `SELECT state, attempt, array(SELECT e->>'error' FROM unnest(errors) e) FROM river_job`).Scan(&state, &tries, &errs))
	require.Equal(t, "completed", state)
	require.Equal(t, 2, tries, "the frozen worker's try and the other's")
	require.Len(t, errs, 1, "only the hand-over is an error: %q", errs)
	require.Contains(t, errs[0], "worker sleepy:1 stopped renewing its lease")
}

// A run's attempts go to its repository's queue: a worker of another
// repository that shares the database never fetches them; one of the
// same repository does.
func TestAttemptsGoToTheirProjectsQueue(t *testing.T) {
	require.Equal(t, queue.Name, queue.QueueOf(""))
	require.Equal(t, queue.Name+"_0123456789abcdef", queue.QueueOf("0123456789abcdef0123456789abcdef01234567"))

	ctx := context.Background()
	_, runDir, workerDir := repos(t)
	db := newDB(t)
	run, wrk := open(t, runDir), open(t, workerDir)
	project := run.Project(ctx)
	require.NotEmpty(t, project)
	var fetched atomic.Int32
	stopOther, err := queue.Start(ctx, db, &queue.WorkOpts{Name: "other:1", Project: strings.Repeat("f", 40), Poll: 100 * time.Millisecond,
		Run: func(context.Context, queue.Args) (nodes.AttemptResult, error) {
			fetched.Add(1)
			return nodes.AttemptResult{}, queue.ErrElsewhere
		}})
	require.NoError(t, err)
	defer stopOther()
	stop, err := queue.Start(ctx, db, &queue.WorkOpts{Name: "mine:2", Project: wrk.Project(ctx), Poll: 100 * time.Millisecond,
		Run: work(&nodes.Pipeline{Repo: wrk, Worker: writer(nil), Remote: "origin"})})
	require.NoError(t, err)
	defer stop()
	d, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Model: "scripted:x", Lease: 5 * time.Second, Project: project})
	require.NoError(t, err)
	// An older version's worker names no repository: it listens on the
	// unnamed queue alone.
	stopOld, err := queue.Start(ctx, db, &queue.WorkOpts{Name: "old:3", Concurrency: 2, Poll: 100 * time.Millisecond,
		Run: func(context.Context, queue.Args) (nodes.AttemptResult, error) {
			return nodes.AttemptResult{}, queue.ErrElsewhere
		}})
	require.NoError(t, err)
	defer stopOld()
	// The run counts the slots of its repository's workers alone.
	n, err := queue.Slots(ctx, db, "r1", project)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	res, err := d.Dispatch(ctx, job(t, run, "r1", "T1"), func(nodes.Activity) {})
	require.NoError(t, err)
	require.Equal(t, "mine:2", res.Worker)
	require.Zero(t, fetched.Load(), "the other repository's worker fetched the job")
	stopOld()
	// A job on the unnamed queue (an older version queued it) is still
	// taken.
	legacy, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Model: "scripted:x", Lease: 5 * time.Second})
	require.NoError(t, err)
	res, err = legacy.Dispatch(ctx, job(t, run, "r1", "T2"), func(nodes.Activity) {})
	require.NoError(t, err)
	require.Equal(t, "mine:2", res.Worker)
}

// A worker listens on its project's queue and on the unnamed one; River
// bounds each queue alone, so jobs on both must not run it past its
// concurrency.
func TestWorkerKeepsItsConcurrencyAcrossQueues(t *testing.T) {
	ctx := context.Background()
	_, runDir, workerDir := repos(t)
	db := newDB(t)
	run, wrk := open(t, runDir), open(t, workerDir)
	p := &nodes.Pipeline{Repo: wrk, Worker: writer(nil), Remote: "origin"}
	var active, most atomic.Int32
	stop, err := queue.Start(ctx, db, &queue.WorkOpts{Name: "one:1", Concurrency: 1, Project: wrk.Project(ctx), Poll: 100 * time.Millisecond,
		Run: func(ctx context.Context, a queue.Args) (nodes.AttemptResult, error) {
			n := active.Add(1)
			defer active.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(500 * time.Millisecond)
			return work(p)(ctx, a)
		}})
	require.NoError(t, err)
	defer stop()
	named, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Model: "scripted:x", Lease: 5 * time.Second, Project: run.Project(ctx)})
	require.NoError(t, err)
	unnamed, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Model: "scripted:x", Lease: 5 * time.Second})
	require.NoError(t, err)
	j1, j2 := job(t, run, "r1", "T1"), job(t, run, "r1", "T2")
	errs := make(chan error, 2)
	for _, dj := range []struct {
		d *queue.Dispatcher
		j nodes.AttemptJob
	}{{named, j1}, {unnamed, j2}} {
		go func() {
			_, err := dj.d.Dispatch(ctx, dj.j, func(nodes.Activity) {})
			errs <- err
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	require.EqualValues(t, 1, most.Load(), "a worker of concurrency 1 ran attempts side by side")
}

// An attempt queued where no worker takes this repository's attempts says
// so, with how to start one, instead of waiting without a word; once a
// worker is there, it is taken.
func TestQueueWithoutWorkersSaysSo(t *testing.T) {
	ctx := context.Background()
	_, runDir, workerDir := repos(t)
	db := newDB(t)
	run, wrk := open(t, runDir), open(t, workerDir)
	d, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Poll: 50 * time.Millisecond, NoWorkerAfter: 200 * time.Millisecond})
	require.NoError(t, err)
	var mu sync.Mutex
	var said []string
	hinted := make(chan struct{})
	var once sync.Once
	go func() {
		<-hinted
		startWriter(t, db, "late:3", wrk, nil)
	}()
	res, err := d.Dispatch(ctx, job(t, run, "r5", "T1"), func(a nodes.Activity) {
		mu.Lock()
		defer mu.Unlock()
		said = append(said, a.Summary)
		if strings.Contains(a.Summary, "none is taking") {
			once.Do(func() { close(hinted) })
		}
	})
	require.NoError(t, err)
	require.Equal(t, "late:3", res.Worker)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "waiting for a worker", said[0])
	require.Equal(t, "waiting for a worker: none is taking this repository's attempts; start `taskloom worker --db …` in a clone of it", said[1])
}

// A worker's fault is a run's (its key, its model, its config): the
// worker leaves that run's attempts to others and takes another run's at
// once. A run's own workers never rest: their fault fails the try, as any
// error does, for the run to see.
func TestWorkerFaultRestsOnlyThatRun(t *testing.T) {
	ctx := context.Background()
	_, runDir, _ := repos(t)
	db := newDB(t)
	run := open(t, runDir)
	stop, err := queue.Start(ctx, db, &queue.WorkOpts{Name: "box:1", Concurrency: 2, Poll: 100 * time.Millisecond,
		Run: func(ctx context.Context, a queue.Args) (nodes.AttemptResult, error) {
			if a.RunID == "rA" {
				return nodes.AttemptResult{}, fmt.Errorf("model spec %q: %w", "openai:x", llm.ErrMissingKey)
			}
			return nodes.AttemptResult{Note: "ok"}, nil
		}})
	require.NoError(t, err)
	t.Cleanup(stop)
	d, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Lease: 5 * time.Second, Poll: 50 * time.Millisecond})
	require.NoError(t, err)
	actx, cancelA := context.WithCancel(ctx)
	defer cancelA()
	go func() { _, _ = d.Dispatch(actx, job(t, run, "rA", "T1"), func(nodes.Activity) {}) }()
	time.Sleep(time.Second) // A's fault, and the rest it starts
	bctx, cancelB := context.WithTimeout(ctx, 10*time.Second)
	defer cancelB()
	res, err := d.Dispatch(bctx, job(t, run, "rB", "T1"), func(nodes.Activity) {})
	require.NoError(t, err, "run B waits behind run A's fault")
	require.Equal(t, "ok", res.Note)

	stop() // rC's job is its own workers' alone
	own, err := queue.Start(ctx, db, &queue.WorkOpts{Name: "driver:2", RunID: "rC", Poll: 100 * time.Millisecond,
		Run: func(ctx context.Context, a queue.Args) (nodes.AttemptResult, error) {
			return nodes.AttemptResult{}, fmt.Errorf("implement %s: %w", a.TaskID, agent.ErrProviderRefused)
		}})
	require.NoError(t, err)
	t.Cleanup(own)
	cctx, cancelC := context.WithCancel(ctx)
	defer cancelC()
	go func() { _, _ = d.Dispatch(cctx, job(t, run, "rC", "T1"), func(nodes.Activity) {}) }()
	require.Eventually(t, func() bool {
		var tries int
		return db.Pool().QueryRow(ctx, `SELECT coalesce(array_length(errors, 1), 0) FROM river_job WHERE args->>'run_id' = 'rC'`).Scan(&tries) == nil && tries > 0
	}, 10*time.Second, 100*time.Millisecond, "the run's own worker fails the try, for the run to see")
}
