//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/store/storetest"
)

// These tests kill the taskloom binary with a real SIGKILL at named points
// of the pipeline (TASKLOOM_CRASH_AT, see crashFunc in cmd/taskloom),
// resume the run, and
// check that the result is the one of an uninterrupted run: the same tree on
// main, each task integrated exactly once, no worktree left behind, and the
// example's tests passing on main. They run the bundled textkit example
// (taskloom demo: real git, real go test, the scripted model, 2 workers).

// killCase is one crash scenario: Crashes[0] kills the first run (taskloom
// demo); each later entry kills the resume that follows; a last resume runs
// without a crash point and must complete.
type killCase struct {
	Name    string
	Crashes []string
	// Postgres runs the case on PostgreSQL as well as on SQLite.
	Postgres bool
	// Damage, when set, is done to the repo after the first crash:
	// "worktrees" deletes every attempt's worktree folder, "dotgit" the
	// .git link of each.
	Damage string
}

// killCases are the crash points. The textkit run goes: breakdown; batch
// [T1 T2] (T2 fails attempt 1); then T2's retry, T3-a, T3-b and T4 in
// batches of up to 2; build verification on main.
var killCases = []killCase{
	{Name: "select_start_2", Crashes: []string{"select:start#2"}},
	{Name: "implement_before_worker", Crashes: []string{"implement:before_worker"}},
	{Name: "implement_after_commit", Crashes: []string{"implement:after_commit"}},
	{Name: "implement_after_commit_2", Crashes: []string{"implement:after_commit#2"}, Postgres: true},
	{Name: "verify_after_tests", Crashes: []string{"verify:after_tests"}},
	{Name: "integrate_before", Crashes: []string{"integrate:before"}, Postgres: true},
	{Name: "integrate_after", Crashes: []string{"integrate:after"}, Postgres: true},
	{Name: "integrate_after_3", Crashes: []string{"integrate:after#3"}},
	{Name: "build_before", Crashes: []string{"build:before"}},
	// Killed again while resuming: the resume itself must be resumable.
	{Name: "integrate_before_2_then_integrate_after", Crashes: []string{"integrate:before#2", "integrate:after"}},
	// The worktrees of the interrupted batch are deleted before the
	// resume: it recreates them (before the worker), or fails those
	// attempts and retries them (after the commit).
	{Name: "implement_before_worker_worktrees_deleted", Crashes: []string{"implement:before_worker"}, Damage: "worktrees", Postgres: true},
	{Name: "implement_after_commit_worktrees_deleted", Crashes: []string{"implement:after_commit"}, Damage: "worktrees"},
	{Name: "implement_before_worker_dotgit_deleted", Crashes: []string{"implement:before_worker"}, Damage: "dotgit"},
}

// killTasks are the textkit plan's tasks after the auto-split.
var killTasks = []string{"T1", "T2", "T3-a", "T3-b", "T4"}

// killSetup starts a kill test: skipped with -short, in parallel with the
// others, with the binary and the uninterrupted reference run, made once
// for every test.
func killSetup(t *testing.T) (string, killRef) {
	t.Helper()
	if testing.Short() {
		t.Skip("the kill -9 end-to-end tests run the whole pipeline many times; skipped with -short")
	}
	t.Parallel()
	bin := killBuild(t)
	refMu.Lock()
	defer refMu.Unlock()
	if refMade == nil {
		ref := killReference(t, bin)
		refMade = &ref
	}
	return bin, *refMade
}

var (
	refMu   sync.Mutex
	refMade *killRef
)

func TestKillResume(t *testing.T) {
	bin, ref := killSetup(t)

	for _, store := range []string{"sqlite", "postgres"} {
		t.Run("store="+store, func(t *testing.T) {
			t.Parallel()
			for _, c := range killCases {
				if store == "postgres" && !c.Postgres {
					continue
				}
				t.Run(c.Name, func(t *testing.T) {
					t.Parallel()
					db := ""
					if store == "postgres" {
						db = storetest.NewPostgresSchema(t)
					}
					dir, runID := killCrashDemo(t, bin, db, c.Crashes[0])
					killDamage(t, dir, c.Damage)
					for _, point := range c.Crashes[1:] {
						res := killExec(t, bin, dir, point, killResumeArgs(runID, dir, db)...)
						require.True(t, res.Killed, "resume under TASKLOOM_CRASH_AT=%s was not killed: %s", point, res)
					}
					res := killExec(t, bin, dir, "", killResumeArgs(runID, dir, db)...)
					require.Equal(t, exitOK, res.Code, "final resume: %s", res)
					killCheck(t, bin, dir, db, runID, ref)
				})
			}
			t.Run("concurrent_resumes", func(t *testing.T) {
				t.Parallel()
				db := ""
				if store == "postgres" {
					db = storetest.NewPostgresSchema(t)
				}
				killConcurrentResumes(t, bin, db, ref)
			})
		})
	}
}

// killConcurrentResumes crashes a run, resumes it (A), and while A drives
// it starts a second resume (B): B must refuse, naming A, and leave A's
// work alone; A then completes the run.
func killConcurrentResumes(t *testing.T, bin, db string, ref killRef) {
	// After the first batch is checkpointed: the resume starts with new
	// worker conversations (the batch of T2's retry and T3-a), which the
	// session slows down so that A surely still works in their worktrees
	// when B arrives.
	dir, runID := killCrashDemo(t, bin, db, "select:start#2")
	sessionPath := filepath.Join(dir, ".taskloom", "demo-session.json")
	killSlowSession(t, sessionPath, 3000, `Task: T2 [\s\S]*Attempt: 2 of`, `Task: T3\-a [\s\S]*Attempt: 1 of`)

	a := exec.Command(bin, killResumeArgs(runID, dir, db, "--json")...)
	a.Dir = dir
	a.Env = killEnv("")
	a.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	a.WaitDelay = 10 * time.Second
	var aErr bytes.Buffer
	a.Stderr = &aErr
	aOut, err := a.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, a.Start())
	t.Cleanup(func() {
		if a.ProcessState == nil {
			_ = syscall.Kill(-a.Process.Pid, syscall.SIGKILL)
			_ = a.Wait()
		}
	})
	// A holds the run's lease once it runs a node.
	working := make(chan struct{})
	var aLines bytes.Buffer
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(aOut)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		signaled := false
		for sc.Scan() {
			aLines.Write(sc.Bytes())
			aLines.WriteByte('\n')
			var ev struct {
				Type string `json:"type"`
			}
			if !signaled && json.Unmarshal(sc.Bytes(), &ev) == nil && (ev.Type == "task_started" || ev.Type == "worker_activity") {
				signaled = true
				close(working)
			}
		}
	}()
	select {
	case <-working:
	case <-scanned:
		_ = a.Wait()
		t.Fatalf("resume A ended before it implemented anything: %v\nstdout:\n%s\nstderr:\n%s", a.ProcessState, aLines.String(), aErr.String())
	case <-time.After(3 * time.Minute):
		t.Fatal("resume A started no implementation in 3 minutes")
	}

	b := killExec(t, bin, dir, "", killResumeArgs(runID, dir, db)...)
	require.Equal(t, exitError, b.Code, "resume B while A drives the run: %s", b)
	host, err := os.Hostname()
	require.NoError(t, err)
	require.Contains(t, b.Stderr, fmt.Sprintf("run %s is being driven by another process (pid %d, host %s)", runID, a.Process.Pid, host))

	// B's refusal must not have disturbed A: A completes the run.
	<-scanned
	err = a.Wait()
	require.NoError(t, err, "resume A after B refused: stdout:\n%s\nstderr:\n%s", aLines.String(), aErr.String())
	killCheck(t, bin, dir, db, runID, ref)
}

// killRef is what an uninterrupted run of the example leaves.
type killRef struct {
	Tree     string   // git ls-tree -r main
	Packages []string // the packages go test ./... reports ok on main
}

// killReference runs the demo once without a crash.
func killReference(t *testing.T, bin string) killRef {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	res := killExec(t, bin, t.TempDir(), "", "demo", "--dir", dir)
	require.Equal(t, exitOK, res.Code, "reference demo: %s", res)
	runID := killRunID(t, res)
	trailers := killTrailers(t, dir, runID)
	tasks := make([]string, 0, len(trailers))
	for task, n := range trailers {
		require.Equal(t, 1, n, "task %s integrated %d times in the reference run", task, n)
		tasks = append(tasks, task)
	}
	require.ElementsMatch(t, killTasks, tasks, "tasks integrated by the reference run")
	ref := killRef{Tree: killGit(t, dir, "ls-tree", "-r", "main")}
	ref.Packages = killGoTest(t, dir)
	require.NotEmpty(t, ref.Packages, "the reference run's main has no tested packages")
	return ref
}

// killCrashDemo runs taskloom demo in a new folder until the crash point
// kills it, and returns the repo and the run ID.
func killCrashDemo(t *testing.T, bin, db, point string) (dir, runID string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "repo")
	args := []string{"demo", "--dir", dir}
	if db != "" {
		args = append(args, "--db", db)
	}
	res := killExec(t, bin, t.TempDir(), point, args...)
	require.True(t, res.Killed, "demo under TASKLOOM_CRASH_AT=%s was not killed: %s", point, res)
	return dir, killRunID(t, res)
}

// killCheck checks a completed run against the reference.
func killCheck(t *testing.T, bin, dir, db, runID string, ref killRef) {
	t.Helper()
	// The run is completed in the store.
	args := []string{"status", runID, "--repo", dir, "--json"}
	if db != "" {
		args = append(args, "--db", db)
	}
	res := killExec(t, bin, dir, "", args...)
	require.Equal(t, exitOK, res.Code, "status: %s", res)
	var status struct {
		Status string `json:"status"`
		Tasks  struct {
			Total     int `json:"total"`
			Completed int `json:"completed"`
		} `json:"tasks"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &status), "status --json: %s", res.Stdout)
	require.Equal(t, "completed", status.Status)
	require.Equal(t, len(killTasks), status.Tasks.Total)
	require.Equal(t, len(killTasks), status.Tasks.Completed)

	// (a) The same tree as an uninterrupted run's.
	require.Equal(t, ref.Tree, killGit(t, dir, "ls-tree", "-r", "main"), "main's tree differs from the uninterrupted run's")

	// (b) Each task integrated exactly once.
	trailers := killTrailers(t, dir, runID)
	for _, task := range killTasks {
		require.Equal(t, 1, trailers[task], "Taskloom-Task trailers of %s on main (all: %v)", task, trailers)
	}
	require.Len(t, trailers, len(killTasks), "trailers on main: %v", trailers)

	// (c) No worktree left: only the main checkout, no attempt folder, no
	// attempt branch.
	var worktrees []string
	for line := range strings.SplitSeq(killGit(t, dir, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			worktrees = append(worktrees, p)
		}
	}
	realDir, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	require.Equal(t, []string{realDir}, worktrees, "git worktree list")
	entries, err := os.ReadDir(filepath.Join(dir, ".taskloom", "worktrees"))
	if !errors.Is(err, os.ErrNotExist) {
		require.NoError(t, err)
		require.Empty(t, entries, ".taskloom/worktrees")
	}
	require.Empty(t, killGit(t, dir, "for-each-ref", "--format=%(refname)", "refs/heads/taskloom/"), "attempt branches left")

	// (d) The checkout is main, clean, and its tests pass.
	require.Equal(t, "main\n", killGit(t, dir, "rev-parse", "--abbrev-ref", "HEAD"))
	require.Empty(t, killGit(t, dir, "status", "--porcelain"), "main's checkout is not clean")
	require.Equal(t, ref.Packages, killGoTest(t, dir), "packages tested on main")
}

// killTrailers counts the Taskloom-Task trailers on main by task. Every
// trailer must name runID.
func killTrailers(t *testing.T, dir, runID string) map[string]int {
	t.Helper()
	out := killGit(t, dir, "log", "main", "--format=%(trailers:key=Taskloom-Task,valueonly,separator=%x0A)")
	counts := map[string]int{}
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		parts := strings.Split(line, "/")
		require.Len(t, parts, 3, "trailer %q: want RUN/TASK/ATTEMPT", line)
		require.Equal(t, runID, parts[0], "trailer %q names another run", line)
		counts[parts[1]]++
	}
	return counts
}

// killGoTest runs go test ./... in dir and returns the packages it reports
// ok.
func killGoTest(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "test", "./...")
	cmd.Dir = dir
	cmd.Env = killEnv("")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test ./... on main:\n%s", out)
	var pkgs []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "ok" {
			pkgs = append(pkgs, f[1])
		}
	}
	sort.Strings(pkgs)
	return pkgs
}

// killSlowSession adds delayMS to the first reply of the scripted
// conversations whose match is one of matches.
func killSlowSession(t *testing.T, path string, delayMS int, matches ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var script struct {
		Conversations []struct {
			Match   string           `json:"match"`
			Replies []map[string]any `json:"replies"`
		} `json:"conversations"`
	}
	require.NoError(t, json.Unmarshal(data, &script))
	slowed := 0
	for _, c := range script.Conversations {
		if slices.Contains(matches, c.Match) && len(c.Replies) > 0 {
			c.Replies[0]["delay_ms"] = delayMS
			slowed++
		}
	}
	require.Equal(t, len(matches), slowed, "conversations slowed in %s", path)
	data, err = json.Marshal(script)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

// killResult is how a taskloom process ended.
type killResult struct {
	Code   int
	Killed bool // by SIGKILL
	Stdout string
	Stderr string
}

func (r killResult) String() string {
	return fmt.Sprintf("exit %d (killed: %v)\nstdout:\n%s\nstderr:\n%s", r.Code, r.Killed, r.Stdout, r.Stderr)
}

// killExec runs the taskloom binary in dir, with TASKLOOM_CRASH_AT set to
// crashAt unless it is "".
func killExec(t *testing.T, bin, dir, crashAt string, args ...string) killResult {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir = dir
	cmd.Env = killEnv(crashAt)
	// Its own process group, so that what a killed run leaves running
	// (a git or go test it had started) goes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := killResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			res.Killed = true
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	default:
		require.NoError(t, err, "taskloom %s", strings.Join(args, " "))
	}
	return res
}

func killResumeArgs(runID, dir, db string, more ...string) []string {
	args := []string{"resume", runID, "--repo", dir}
	if db != "" {
		args = append(args, "--db", db)
	}
	return append(args, more...)
}

// killEnv is the test's environment without TASKLOOM_ variables, plus
// TASKLOOM_CRASH_AT when crashAt is not "".
func killEnv(crashAt string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKLOOM_") {
			env = append(env, kv)
		}
	}
	if crashAt != "" {
		env = append(env, "TASKLOOM_CRASH_AT="+crashAt)
	}
	return env
}

var killRunIDPattern = regexp.MustCompile(`(?m)^run (\S+)$`)

func killRunID(t *testing.T, res killResult) string {
	t.Helper()
	m := killRunIDPattern.FindStringSubmatch(res.Stdout)
	require.NotNil(t, m, "no run ID in the output: %s", res)
	return m[1]
}

func killGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), stderr.String())
	return string(out)
}

// killBuild returns the taskloom binary, built once for the package's
// tests.
func killBuild(t *testing.T) string {
	t.Helper()
	return taskloomBin.Path(t)
}

// killDamage does a killCase's Damage to the repo in dir.
func killDamage(t *testing.T, dir, damage string) {
	t.Helper()
	if damage == "" {
		return
	}
	entries, err := os.ReadDir(filepath.Join(dir, ".taskloom", "worktrees"))
	require.NoError(t, err)
	require.NotEmpty(t, entries, "no worktree to damage")
	for _, e := range entries {
		path := filepath.Join(dir, ".taskloom", "worktrees", e.Name())
		switch damage {
		case "worktrees":
			require.NoError(t, os.RemoveAll(path))
		case "dotgit":
			// A parallel worker's worktree may not have its .git yet: the
			// kill came while git was still making it.
			if err := os.Remove(filepath.Join(path, ".git")); !errors.Is(err, os.ErrNotExist) {
				require.NoError(t, err)
			}
		default:
			t.Fatalf("unknown damage %q", damage)
		}
	}
}
