//go:build unix

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/demo"
	"github.com/taskloom/taskloom/store/storetest"
)

// These tests run the textkit example on several "machines" on this one:
// a bare repo as the shared remote, the run's clone, and clones that run
// `taskloom worker` against the run's PostgreSQL database.

// fleet is a run's repo, its remote, and a fresh database.
type fleet struct {
	bin, remote, run, db string
	pool                 *pgxpool.Pool
}

func newFleet(t *testing.T, lease string) *fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("the remote worker end-to-end tests run the whole pipeline; skipped with -short")
	}
	f := &fleet{bin: killBuild(t)}
	dir := t.TempDir()
	f.run, f.remote = filepath.Join(dir, "run"), filepath.Join(dir, "remote.git")
	require.NoError(t, demo.Prepare(t.Context(), f.run))
	cfgPath := filepath.Join(f.run, ".project-config.json")
	cfg, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	cfg = bytes.Replace(cfg, []byte(`"parallel_workers": 2,`), []byte(`"parallel_workers": 2, "worker": {"lease": "`+lease+`"},`), 1)
	require.NoError(t, os.WriteFile(cfgPath, cfg, 0o644))
	killGit(t, f.run, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "a short worker lease")
	killGit(t, dir, "clone", "-q", "--bare", f.run, f.remote)
	killGit(t, f.run, "remote", "add", "origin", f.remote)
	// The first tasks are slow enough that a worker is caught holding one.
	killSlowSession(t, filepath.Join(f.run, ".taskloom", "demo-session.json"), 3000,
		`Task: T1 [\s\S]*Attempt: 1 of`, `Task: T2 [\s\S]*Attempt: 1 of`)
	f.db = storetest.NewPostgresSchema(t)
	f.pool, err = pgxpool.New(t.Context(), f.db)
	require.NoError(t, err)
	t.Cleanup(f.pool.Close)
	return f
}

// worker starts `taskloom worker` in a new clone of the remote.
func (f *fleet) worker(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	clone := filepath.Join(filepath.Dir(f.run), name)
	killGit(t, filepath.Dir(f.run), "clone", "-q", f.remote, clone)
	cmd := exec.Command(f.bin, "worker", "--db", f.db)
	cmd.Dir = clone
	cmd.Env = killEnv("")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("worker %s:\n%s", name, out.String())
		}
	})
	return cmd
}

// drive runs `taskloom run` with --workers n and returns its result.
func (f *fleet) drive(t *testing.T, n int) killResult {
	t.Helper()
	return killExec(t, f.bin, f.run, "", "run", "PRODUCT.md", "--db", f.db, "--workers", fmt.Sprint(n))
}

// check asserts what every run of the fleet must end with: exit 0, each
// task integrated exactly once, the commits of the attempts that remote
// workers ran on the remote, and the example's tests passing on main.
func (f *fleet) check(t *testing.T, res killResult) string {
	t.Helper()
	require.Equal(t, 0, res.Code, "%s", res)
	runID := killRunID(t, res)
	counts := killTrailers(t, f.run, runID)
	for _, id := range killTasks {
		require.Equal(t, 1, counts[id], "task %s integrated %d times", id, counts[id])
	}
	rows, err := f.pool.Query(t.Context(), `SELECT args->>'task_id', args->>'attempt', metadata->'output'->'attempt'->>'commit' FROM river_job
		WHERE state = 'completed' AND attempted_by[array_length(attempted_by, 1)] NOT LIKE '%/' || $1 AND (metadata->'output'->'attempt'->>'changed')::bool`, runID)
	require.NoError(t, err)
	remote := 0
	for rows.Next() {
		var task, attempt, commit string
		require.NoError(t, rows.Scan(&task, &attempt, &commit))
		require.NotEmpty(t, commit, "attempt %s/%s", task, attempt)
		killGit(t, f.remote, "cat-file", "-e", commit+"^{commit}") // pushed there by its worker
		remote++
	}
	require.NoError(t, rows.Err())
	require.NotZero(t, remote, "no attempt ran on a remote worker")
	// The run ended: the refs it shared with its workers are gone.
	require.Empty(t, killGit(t, f.remote, "for-each-ref", "--format=%(refname)", "refs/taskloom/"), "refs left on the remote")
	require.NotEmpty(t, killGoTest(t, f.run))
	return runID
}

func hostName(t *testing.T) string {
	h, err := os.Hostname()
	require.NoError(t, err)
	return h
}

func TestRemoteWorkersSurviveAKilledWorker(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "3s")
	w1 := f.worker(t, "w1")
	f.worker(t, "w2")
	victim := fmt.Sprintf("%s:%d", hostName(t), w1.Process.Pid)

	// Kill w1 (-9) as soon as it holds an attempt.
	var killedJob int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		for ctx.Err() == nil {
			if f.pool.QueryRow(ctx, `SELECT job_id FROM attempt_leases WHERE worker = $1`, victim).Scan(&killedJob) == nil {
				_ = syscall.Kill(-w1.Process.Pid, syscall.SIGKILL)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	res := f.drive(t, 0)
	wg.Wait()
	require.NotZero(t, killedJob, "worker w1 never held an attempt")
	f.check(t, res)

	// River ran the killed worker's job again, on the other worker.
	var tries int
	var errs []string
	var by []string
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT attempt, array(SELECT e->>'error' FROM unnest(errors) e), attempted_by FROM river_job WHERE id = $1`, killedJob).
		Scan(&tries, &errs, &by))
	require.GreaterOrEqual(t, tries, 2, "the killed worker's job was not retried")
	require.Contains(t, strings.Join(errs, "\n"), "worker "+victim+" stopped renewing its lease")
	require.NotEqual(t, victim, by[len(by)-1], "the retry ran on the worker that died")
}

func TestRemoteAndInProcessWorkers(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "30s")
	remote := f.worker(t, "w1")
	res := f.drive(t, 1)
	runID := f.check(t, res)
	rows, err := f.pool.Query(t.Context(), `SELECT DISTINCT attempted_by[array_length(attempted_by, 1)] FROM river_job WHERE state = 'completed'`)
	require.NoError(t, err)
	var clients []string
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		clients = append(clients, c)
	}
	require.NoError(t, rows.Err())
	require.ElementsMatch(t, []string{fmt.Sprintf("%s:%d", hostName(t), remote.Process.Pid), ""}, replaceRunWorker(clients, runID),
		"attempts ran both on the remote worker and in the run's process")

	// Stopped by the user, a worker says so and exits 130, as a run does.
	require.NoError(t, remote.Process.Signal(syscall.SIGTERM))
	err = remote.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "worker output:\n%s", remote.Stdout)
	require.Equal(t, 130, ee.ExitCode(), "worker output:\n%s", remote.Stdout)
	out := remote.Stdout.(*bytes.Buffer).String()
	require.Contains(t, out, "taskloom worker stopped")
	// It took the worktrees it parked for its next attempts with it.
	require.NotContains(t, killGit(t, remote.Dir, "worktree", "list"), "_idle")
	// It said what it did, an attempt a line as it started and ended.
	require.Regexp(t, `(?m)^\d\d:\d\d:\d\d run `+runID+`: T[\w-]+ attempt 1: started$`, out)
	require.Regexp(t, `(?m)^\d\d:\d\d:\d\d run `+runID+`: T[\w-]+ attempt 1: finished: .+$`, out)

	// A clone without the shared remote is refused at once, in one line.
	lone := filepath.Join(t.TempDir(), "lone")
	killGit(t, filepath.Dir(lone), "init", "-q", "-b", "main", lone)
	killGit(t, lone, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
	cmd := exec.Command(f.bin, "worker", "--db", f.db)
	cmd.Dir, cmd.Env = lone, killEnv("")
	stderr, err := cmd.CombinedOutput()
	require.ErrorAs(t, err, &ee)
	require.Equal(t, 1, ee.ExitCode(), "%s", stderr)
	require.Regexp(t, `^taskloom: \S+ has no git remote "origin", which runs share attempts through: .+\n$`, string(stderr))
}

// replaceRunWorker blanks the run's own worker (host:pid/RUN_ID), whose
// pid the test does not know.
func replaceRunWorker(clients []string, runID string) []string {
	out := make([]string, len(clients))
	for i, c := range clients {
		if !strings.HasSuffix(c, "/"+runID) {
			out[i] = c
		}
	}
	return out
}

func TestRunKilledWhileRemoteWorkersWork(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "30s")
	f.worker(t, "w1")
	f.worker(t, "w2")

	// The run is killed (-9) while a worker holds one of its attempts.
	cmd := exec.Command(f.bin, "run", "PRODUCT.md", "--db", f.db, "--workers", "0")
	cmd.Dir, cmd.Env = f.run, killEnv("")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	var job int64
	require.Eventually(t, func() bool {
		return f.pool.QueryRow(t.Context(), `SELECT job_id FROM attempt_leases LIMIT 1`).Scan(&job) == nil
	}, 2*time.Minute, 20*time.Millisecond, "no worker took an attempt: %s", &out)
	runID := killRunIDPattern.FindStringSubmatch(out.String())[1]
	// status names the worker that holds it.
	st := killExec(t, f.bin, f.run, "", "status", runID, "--db", f.db, "--json")
	require.Equal(t, 0, st.Code, "%s", st)
	require.Regexp(t, `"host": *"`+regexp.QuoteMeta(hostName(t))+`:[0-9]+"`, st.Stdout)
	require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
	_ = cmd.Wait()

	// The workers finish what they hold without the run.
	require.Eventually(t, func() bool {
		var state string
		return f.pool.QueryRow(t.Context(), `SELECT state FROM river_job WHERE id = $1`, job).Scan(&state) == nil && state == "completed"
	}, 2*time.Minute, 50*time.Millisecond)

	// The resume takes their results instead of running them again.
	res := killExec(t, f.bin, f.run, "", killResumeArgs(runID, f.run, f.db)...)
	require.Equal(t, 0, res.Code, "%s", res)
	counts := killTrailers(t, f.run, runID)
	for _, id := range killTasks {
		require.Equal(t, 1, counts[id], "task %s integrated %d times", id, counts[id])
	}
	var tries, jobs int
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT attempt FROM river_job WHERE id = $1`, job).Scan(&tries))
	require.Equal(t, 1, tries, "the attempt finished while the run was down was run again")
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job j WHERE EXISTS (SELECT 1 FROM river_job k
		WHERE k.id <> j.id AND k.args->>'run_id' = j.args->>'run_id' AND k.args->>'task_id' = j.args->>'task_id' AND k.args->>'attempt' = j.args->>'attempt')`).Scan(&jobs))
	require.Zero(t, jobs, "an attempt was queued twice")
	require.NotEmpty(t, killGoTest(t, f.run))
}
