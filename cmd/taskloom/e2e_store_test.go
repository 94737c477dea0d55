//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/internal/review"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/sqlite"
	"github.com/taskloom/taskloom/store/storetest"
)

// These tests break the store under a running taskloom run, in process:
// the PostgreSQL server restarts or goes away (a throwaway server of the
// test's own), another process takes the run's lease, a checkpoint row is
// damaged, the SQLite file is deleted or replaced. They set session.PointFunc to act
// at exact places of the pipeline, so they do not run in parallel.

// storeTasks are the tasks of commandRepo's PRODUCT.md.
var storeTasks = []string{"T1", "T2", "T3", "T4"}

// commandRepo makes a git repo whose PRODUCT.md lists four independent
// tasks, done by an external agent CLI (a shell script that writes
// TASK_ID.txt) with two workers. cfg changes .project-config.json.
func commandRepo(t *testing.T, cfg func(map[string]any)) string {
	t.Helper()
	t.Setenv("ANTHROPIC_API_KEY", "")
	dir := t.TempDir()
	agentScript := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(agentScript, []byte("#!/bin/sh\necho \"done by $2\" > \"$2.txt\"\necho '{\"type\":\"result\",\"result\":\"done\"}'\n"), 0o755))
	c := map[string]any{
		"parallel_workers":   2,
		"verify":             map[string]any{"command": []string{"true"}},
		"build_verification": map[string]any{"command": []string{"true"}},
		"worker":             map[string]any{"kind": "command", "command": []string{agentScript, "{prompt}", "{task_id}"}},
	}
	if cfg != nil {
		cfg(c)
	}
	data, err := json.Marshal(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".project-config.json"), data, 0o644))
	var product strings.Builder
	product.WriteString("# p\n\n## Milestone M1: One\n")
	for _, id := range storeTasks {
		fmt.Fprintf(&product, "\n### Task %s: Write %s.txt\n- acceptance_criteria:\n  - %s.txt exists\n- files_to_create: %s.txt\n", id, id, id, id)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "PRODUCT.md"), []byte(product.String()), 0o644))
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "p")
	return dir
}

// eachIntegratedOnce checks that every task has one Taskloom-Task trailer on
// main.
func eachIntegratedOnce(t *testing.T, dir string) {
	t.Helper()
	tr := trailers(t, dir)
	require.Equal(t, storeTasks, sortedKeys(tr), "each task is integrated")
	for task, attempts := range tr {
		require.Len(t, attempts, 1, "task %s integrated once", task)
	}
}

// watchWriter is a stderr that calls fn (once, in its own goroutine) when
// what was written contains substr.
type watchWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	substr string
	fn     func()
	seen   int // how many times substr was written
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	before := strings.Count(w.buf.String(), w.substr)
	n, err := w.buf.Write(p)
	if after := strings.Count(w.buf.String(), w.substr); after > before {
		w.seen = after
		if w.fn != nil {
			go w.fn()
		}
	}
	return n, err
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// taskloomTo runs the CLI in process with stderr going to stderr.
func taskloomTo(t *testing.T, stderr *watchWriter, args ...string) (int, string) {
	t.Helper()
	var stdout bytes.Buffer
	code := Execute(context.Background(), args, strings.NewReader(""), &stdout, stderr)
	return code, stdout.String()
}

// atPoint sets session.PointFunc to call fn once, at the n-th passage of point,
// and clears it when the test ends.
func atPoint(t *testing.T, point string, n int, fn func()) {
	t.Helper()
	var mu sync.Mutex
	seen := 0
	session.PointFunc = func(p string) {
		if p != point {
			return
		}
		mu.Lock()
		seen++
		hit := seen == n
		mu.Unlock()
		if hit {
			fn()
		}
	}
	t.Cleanup(func() { session.PointFunc = nil })
}

const unreachableNotice = "store unreachable ("

// TestE2EStoreRestartMidRun: the PostgreSQL server stops twice during a
// run: right after a task was integrated (before its checkpoint), and as a
// worker starts. Each time, the run says once that it waits for the store;
// the server comes back when it does; the run completes, each task
// integrated once. With an origin remote the attempts go through the River
// queue in the same database, whose workers must ride out the restarts
// too.
func TestE2EStoreRestartMidRun(t *testing.T) {
	skipShort(t)
	for _, queued := range []bool{false, true} {
		t.Run(map[bool]string{false: "in-process", true: "queued"}[queued], func(t *testing.T) {
			srv := checkpointtest.StartPostgres(t)
			dir := commandRepo(t, nil)
			if queued {
				remote := filepath.Join(t.TempDir(), "remote.git")
				git(t, dir, "init", "-q", "--bare", remote)
				git(t, dir, "remote", "add", "origin", remote)
				git(t, dir, "push", "-q", "origin", "main")
			}
			// In process, the server comes back when the run says it
			// waits for it. Queued, the run may be waiting on its jobs and
			// say nothing: the server comes back a second later, as a
			// restarted one does, and the queue's workers must go on.
			stderr := &watchWriter{substr: unreachableNotice, fn: srv.Start}
			if queued {
				stderr.fn = nil
			}
			var mu sync.Mutex
			stops := 0
			stop := func() {
				mu.Lock()
				defer mu.Unlock()
				stops++
				srv.Stop()
				if queued {
					time.AfterFunc(time.Second, srv.Start)
				}
			}
			var passed sync.Map
			session.PointFunc = func(p string) {
				// The first integration, and the third worker start.
				n, _ := passed.LoadOrStore(p, new(int))
				mu.Lock()
				*n.(*int)++
				k := *n.(*int)
				mu.Unlock()
				if (p == "integrate:after" && k == 1) || (p == "implement:before_worker" && k == 3) {
					stop()
				}
			}
			t.Cleanup(func() { session.PointFunc = nil })

			code, stdout := taskloomTo(t, stderr, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir, "--db", srv.URL())
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			id := runID(t, stdout)
			require.Contains(t, stdout, "run "+id+": completed")
			eachIntegratedOnce(t, dir)
			noWorktreesLeft(t, dir)
			mu.Lock()
			require.Equal(t, 2, stops)
			mu.Unlock()
			if !queued {
				require.Equal(t, 2, strings.Count(stderr.String(), unreachableNotice), "one notice per outage:\n%s", stderr)
				require.Contains(t, stderr.String(), "; retrying for up to 2m\n")
			} else {
				require.LessOrEqual(t, strings.Count(stderr.String(), unreachableNotice), 2, "at most one notice per outage:\n%s", stderr)
				require.Equal(t, len(storeTasks), riverJobs(t, srv.URL(), id), "each attempt went through the queue once")
			}
		})
	}
}

// riverJobs counts the River jobs of a run: the attempts it queued.
func riverJobs(t *testing.T, url, runID string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.Background()) }()
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE args->>'run_id' = $1`, runID).Scan(&n))
	return n
}

// TestE2EStoreRetryExhausted: the server goes away for longer than
// database.retry_for: the run stops with exit 1 and one line saying so,
// and once the server is back, resume finishes it, each task integrated
// once.
func TestE2EStoreRetryExhausted(t *testing.T) {
	skipShort(t)
	srv := checkpointtest.StartPostgres(t)
	dir := commandRepo(t, func(c map[string]any) { c["database"] = map[string]any{"retry_for": "2s"} })
	atPoint(t, "integrate:after", 1, srv.Stop)
	stderr := &watchWriter{substr: unreachableNotice}
	code, stdout := taskloomTo(t, stderr, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir, "--db", srv.URL())
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	id := runID(t, stdout)
	errLines := stderr.String()
	require.Equal(t, 1, strings.Count(errLines, unreachableNotice), "the wait is announced once:\n%s", errLines)
	require.Contains(t, errLines, "retrying for up to 2s")
	lines := strings.Split(strings.TrimSpace(errLines), "\n")
	require.Len(t, lines, 2, "the notice and one error line:\n%s", errLines)
	require.Regexp(t, `^taskloom: run `+id+` stopped: store postgres://\S+ unreachable for 2s: .+; resume it when the store is back: taskloom resume `+id+` --repo \S+ --db 'postgres://\S+'$`, lines[1])
	require.Equal(t, 1, strings.Count(stdout+errLines, "unreachable for 2s"), "the error is printed once\nstdout:\n%s", stdout)
	require.NotContains(t, stdout, ": completed")

	srv.Start()
	session.PointFunc = nil
	code, out, errOut := taskloom(t, "resume", id, "--repo", dir, "--db", srv.URL())
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "run "+id+": completed")
	eachIntegratedOnce(t, dir)
	noWorktreesLeft(t, dir)
}

// TestE2ELeaseLost: another process takes the run's lease (its row is
// rewritten behind the run's back) after a task was integrated: the run
// stops with exit 1 naming the lost lease, and never reports completed.
func TestE2ELeaseLost(t *testing.T) {
	skipShort(t)
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			dir := commandRepo(t, nil)
			db := filepath.Join(t.TempDir(), "taskloom.db")
			if kind == "postgres" {
				db = storetest.NewPostgresSchema(t)
			}
			const other = "pid 1, host elsewhere"
			atPoint(t, "integrate:after", 1, func() {
				steal(t, db, other)
			})
			code, stdout, stderr := taskloom(t, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir, "--db", db)
			require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			id := runID(t, stdout)
			require.NotContains(t, stdout, ": completed")
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line:\n%s", stderr)
			require.Regexp(t, `^taskloom: run `+id+` stopped: it lost its lease on the store`, stderr)
			require.Contains(t, stderr, "("+other+") took the run over")
		})
	}
}

// steal makes holder the holder of every run's lease in the store at db.
func steal(t *testing.T, db, holder string) {
	t.Helper()
	ctx := context.Background()
	s, err := session.OpenStore(ctx, db, &session.StoreOpts{SkipMigrate: true})
	require.NoError(t, err)
	defer s.Close()
	switch sv := s.(type) {
	case *sqlite.Driver:
		_, err = sv.DB().ExecContext(ctx, `UPDATE threads SET lease_holder = ?, lease_token = lease_token + 1,
			lease_expires = lease_expires + 3600000000`, holder)
	case *postgres.Driver:
		_, err = sv.Pool().Exec(ctx, `UPDATE threads SET lease_holder = $1, lease_token = lease_token + 1,
			lease_expires = now() + interval '1 hour'`, holder)
	}
	require.NoError(t, err)
}

// TestE2ECorruptCheckpoint: two runs share a store and one's newest
// checkpoint is damaged: runs lists both, status of the other works,
// status and resume of the damaged one exit 1 naming it and the
// checkpoint.
func TestE2ECorruptCheckpoint(t *testing.T) {
	skipShort(t)
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "shared.db")
			if kind == "postgres" {
				db = storetest.NewPostgresSchema(t)
			}
			var ids, dirs []string
			for range 2 {
				dir := commandRepo(t, nil)
				code, stdout, stderr := taskloom(t, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir, "--db", db)
				require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
				ids, dirs = append(ids, runID(t, stdout)), append(dirs, dir)
			}
			bad, good := ids[0], ids[1]
			head := corrupt(t, db, bad)

			code, stdout, stderr := taskloom(t, "runs", "--repo", dirs[1], "--db", db)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Contains(t, stdout, good)
			require.Contains(t, stdout, bad, "the damaged run is still listed")
			require.Regexp(t, regexp.MustCompile(`(?m)^`+bad+`\s.*unreadable`), stdout)
			code, stdout, stderr = taskloom(t, "runs", "--repo", dirs[1], "--db", db, "--json")
			require.Equal(t, 0, code, "stderr:\n%s", stderr)
			var rows []map[string]any
			require.NoError(t, json.Unmarshal([]byte(stdout), &rows))
			require.Len(t, rows, 2)

			code, stdout, stderr = taskloom(t, "status", good, "--repo", dirs[1], "--db", db)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Contains(t, stdout, "run "+good+": completed")
			code, _, stderr = taskloom(t, "history", good, "--repo", dirs[1], "--db", db)
			require.Equal(t, 0, code, "stderr:\n%s", stderr)

			want := fmt.Sprintf("taskloom: run %s: checkpoint %d cannot be decoded: ", bad, head)
			for _, args := range [][]string{{"status", bad}, {"resume", bad}} {
				code, stdout, stderr = taskloom(t, append(args, "--repo", dirs[0], "--db", db)...)
				require.Equal(t, 1, code, "%v\nstdout:\n%s\nstderr:\n%s", args, stdout, stderr)
				require.True(t, strings.HasPrefix(stderr, want), "%v: stderr %q, want it to start with %q", args, stderr, want)
				require.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line:\n%s", args, stderr)
			}
			// The way on that the line names works: a fork of the
			// checkpoint before the damaged one.
			from := fmt.Sprint(head - 1)
			require.Contains(t, stderr, "; to go on from the checkpoint before it: taskloom resume "+bad+" --from "+from+" --repo "+review.ShellQuote(dirs[0])+" --db ",
				"the way on finds the store it was given")
			// History lists the damaged checkpoint as such, beside the
			// others, so that one can be picked to go on from.
			code, stdout, stderr = taskloom(t, "history", bad, "--repo", dirs[0], "--db", db)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.Regexp(t, regexp.MustCompile(fmt.Sprintf(`(?m)^\s*%d\s.*cannot be decoded`, head)), stdout)
			code, stdout, stderr = taskloom(t, "resume", bad, "--from", from, "--repo", dirs[0], "--db", db)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			// The fork started now, after its source.
			code, stdout, _ = taskloom(t, "runs", "--repo", dirs[0], "--db", db, "--json")
			require.Equal(t, 0, code)
			require.NoError(t, json.Unmarshal([]byte(stdout), &rows))
			require.Len(t, rows, 3)
			started := map[string]time.Time{}
			for _, r := range rows {
				at, err := time.Parse(time.RFC3339Nano, r["started_at"].(string))
				require.NoError(t, err)
				started[r["run_id"].(string)] = at
			}
			for id, at := range started {
				if id != bad && id != good {
					require.True(t, at.After(started[bad]), "the fork %s started after its source", id)
				}
			}
		})
	}
}

// corrupt damages run runID's newest checkpoint in the store at db and
// returns its step.
func corrupt(t *testing.T, db, runID string) int64 {
	t.Helper()
	s, err := session.OpenStore(context.Background(), db, &session.StoreOpts{SkipMigrate: true})
	require.NoError(t, err)
	defer s.Close()
	return storetest.DamageHead(t, s, runID)
}

// TestE2ESQLiteFileGone: the run's SQLite file is deleted, or replaced by
// another database, after a task was integrated: the run stops at its next
// checkpoint with exit 1 naming the file, and never reports completed.
func TestE2ESQLiteFileGone(t *testing.T) {
	skipShort(t)
	for _, replace := range []bool{false, true} {
		t.Run(map[bool]string{false: "deleted", true: "replaced"}[replace], func(t *testing.T) {
			dir := commandRepo(t, nil)
			db := filepath.Join(dir, ".taskloom", "taskloom.db")
			atPoint(t, "integrate:after", 1, func() {
				for _, suffix := range []string{"", "-wal", "-shm"} {
					require.NoError(t, os.Remove(db+suffix))
				}
				if replace {
					s, err := sqlite.Open(context.Background(), db, nil)
					require.NoError(t, err)
					require.NoError(t, s.Close())
				}
			})
			code, stdout, stderr := taskloom(t, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir)
			require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			require.NotContains(t, stdout, ": completed")
			require.Equal(t, 1, strings.Count(stderr, "\n"), "one line:\n%s", stderr)
			want := "was deleted"
			if replace {
				want = "was replaced by another file"
			}
			require.Contains(t, stderr, "store "+db+" "+want)
		})
	}
}

// A fork taken before the source integrated a try that build verification
// then reverted does not count that try as on main: its trailer is, but
// so is the revert's.
func TestE2EForkDoesNotAdoptARevertedTry(t *testing.T) {
	skipShort(t)
	dir := commandRepo(t, func(c map[string]any) {
		c["max_attempts"], c["parallel_workers"] = 1, 1
		c["build_verification"] = map[string]any{"command": []string{"sh", "-c", "! test -f T1.txt"}}
	})
	code, stdout, stderr := taskloom(t, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir)
	require.Equal(t, exitReview, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	id := runID(t, stdout)
	require.Contains(t, git(t, dir, "log", "--format=%B", "main"), "Taskloom-Reverts: "+id+"/T1/1")

	code, stdout, _ = taskloom(t, "history", id, "--repo", dir, "--json", "--all")
	require.Equal(t, exitOK, code)
	var cps []struct {
		Step  int64    `json:"step"`
		Nodes []string `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &cps))
	from := int64(-1)
	for _, cp := range cps {
		if slices.Contains(cp.Nodes, "verify_task") && from < 0 {
			from = cp.Step // T1 verified, not yet integrated
		}
	}
	require.GreaterOrEqual(t, from, int64(0), "%v", cps)
	code, stdout, stderr = taskloom(t, "resume", id, "--from", fmt.Sprint(from), "--repo", dir)
	require.Equal(t, exitReview, code, "T1 is redone, and breaks the build again\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.NotContains(t, stdout, "T1    integrated")
	require.Error(t, exec.Command("git", "-C", dir, "cat-file", "-e", "main:T1.txt").Run(), "T1.txt is not on main")
}
