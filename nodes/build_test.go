package nodes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store/storetest"
	"github.com/taskloom/taskloom/verify"
)

// Two tries that pass on their own but break main together (each declares
// calc.helper) are integrated in one batch; build verification bisects,
// blames the second together with the first, reverts it by a commit of its
// own, and its retry is told why.
func TestBuildBisectsToAPairAndRevertsTheCulprit(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{
		"T1":   {"calc/one.go": helperOneGo},
		"T2/1": {"calc/two.go": helperTwoGo},
		"T2/2": {"calc/two.go": helperTwoOK},
	}}
	plan := planOf(task("T1", "One", []string{"calc/one.go"}, ""), task("T2", "Two", []string{"calc/two.go"}, ""))
	p := newTestPipeline(t, dir, w, plan)
	p.Workers = 2
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()

	require.Equal(t, RunCompleted, status, logText(res.State))
	require.Equal(t, []string{"run-1/T1/1", "run-1/T2/1", "run-1/revert/1", "run-1/T2/2"}, trailers(t, dir),
		"the revert is integrated once, like an attempt")
	require.Equal(t, []string{"T1/1 worker 1", "T2/1 worker 2", "T2/2 worker 1"}, h.eventsOf(EventTaskStarted))
	log := logText(res.State)
	require.Contains(t, log, "build verification failed on main at ")
	require.Contains(t, log, "bisect: bisecting over 2 attempts: T1/1, T2/1")
	require.Contains(t, log, "bisect: build 1, prefix 0 of 2: passes")
	require.Contains(t, log, "bisect: build 2, prefix 1 of 2 (through T1/1): passes")
	require.Contains(t, log, "plus the suspect ")
	require.Contains(t, log, "bisect: bisection over 2 attempts took 4 builds: T2/1 broke main together with T1/1 (each passes without the other)")
	require.Contains(t, log, "T2 broke main; reverted it as ")

	broke, _ := res.State.Attempts.Get("T2/1")
	require.NotEmpty(t, broke.Reverted)
	require.Contains(t, gitT(t, dir, "log", "-1", "--format=%B", broke.Reverted), "Revert T2: it broke the build on main")
	require.Contains(t, broke.Error, "breaks the build together with T1")
	retry := w.job(t, "T2", 2)
	require.Contains(t, retry.PreviousError, "breaks the build together with T1")
	require.Contains(t, retry.PreviousError, "helper redeclared")
	require.Equal(t, helperTwoOK, showFile(t, dir, "main", "calc/two.go"))
	require.Empty(t, res.State.Culprits.Get())
	require.Equal(t, res.State.Head.Get(), res.State.Verified.Get())

	// The fate of T2 is its second attempt's commit, not the reverted one.
	fates := Fates(res.State)
	two, _ := res.State.Attempts.Get("T2/2")
	require.Equal(t, two.Integrated, fates[1].Commit)
}

// A try that passes its own tests but fails the build command (full go
// vet) on main is found alone; out of attempts, it is escalated with the
// build's failure, and the try integrated after it stays.
func TestBuildCulpritAloneEscalates(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	selfAssign := "package calc\n\n// Sub returns a-b.\nfunc Sub(a, b int) int {\n\ta = a\n\treturn a - b\n}\n"
	w := &fileWorker{script: map[string]map[string]string{
		"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
		"T2": {"calc/sub.go": selfAssign, "calc/sub_test.go": subTestGo},
		"T3": {"calc/neg.go": negGo, "calc/neg_test.go": negTestGo},
	}}
	plan := planOf(
		task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"),
		task("T2", "Sub", []string{"calc/sub.go"}, "calc/sub_test.go"),
		task("T3", "Neg", []string{"calc/neg.go"}, "calc/neg_test.go"),
	)
	p := newTestPipeline(t, dir, w, plan)
	p.Workers, p.MaxAttempts = 3, 1
	p.BuildCommand = []string{"go", "vet", "./..."}
	var mu sync.Mutex
	var points []string
	p.CrashFunc = func(point string) {
		mu.Lock()
		defer mu.Unlock()
		points = append(points, point)
	}
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()

	ps := []EscalationPayload{pausedFor(t, res, status, "T2", ReasonBuild)}
	require.Contains(t, ps[0].Error, "go vet ./... exited with code 1: ")
	require.Contains(t, ps[0].Error, "self-assignment of a")
	// The reverted attempt's ref is its commit on the branch, which git
	// show accepts.
	broke, _ := res.State.Attempts.Get("T2/1")
	require.Equal(t, broke.Integrated, ps[0].Ref)
	require.Equal(t, selfAssign, showFile(t, dir, ps[0].Ref, "calc/sub.go"))
	require.Empty(t, showFile(t, dir, "main", "calc/sub.go"), "the culprit is out of main")
	require.Equal(t, negGo, showFile(t, dir, "main", "calc/neg.go"), "the try after it stays")
	log := logText(res.State)
	require.Contains(t, log, "bisect: bisection over 3 attempts took 4 builds: T2/1 broke main\n")
	require.Contains(t, log, "bisect: build 4, prefix 0 of 3 plus the suspect ")
	require.Contains(t, log, ": fails: go vet ./... exited with code 1")
	require.Equal(t, []string{"run-1/T1/1", "run-1/T2/1", "run-1/T3/1", "run-1/revert/1"}, trailers(t, dir))
	mu.Lock()
	for _, want := range []string{"select:start", "implement:before_worker", "implement:after_commit", "verify:after_tests", "integrate:before", "integrate:after", "build:before", "revert:after"} {
		require.Contains(t, points, want)
	}
	mu.Unlock()

	res, status = h.review(res, func(EscalationPayload) Decision { return Decision{Action: ActionSkip} })
	require.Equal(t, RunPartial, status, logText(res.State))
	require.Equal(t, planner.StatusSkipped, taskStatus(t, res.State, "T2"))
	require.Equal(t, []string{"run-1/T1/1", "run-1/T2/1", "run-1/T3/1", "run-1/revert/1"}, trailers(t, dir))
}

// The branch broken before the run is not blamed on the run's tries: they
// stay, and the run fails at the end.
func TestBuildBrokenBeforeTheRunFails(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, map[string]string{"calc/broken_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) { t.Fatal(\"broken before\") }\n"})
	w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/add.go": addGo}}}
	p := newTestPipeline(t, dir, w, planOf(task("T1", "Add", []string{"calc/add.go"}, "")))
	// The task's own tests are none: the verify command alone would fail
	// it, so it runs go test on the package it adds to, and the build
	// verification runs them all.
	p.VerifyCommand = []string{"go", "build", "./..."}
	p.BuildCommand = []string{"go", "test", "./..."}
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, graph.StatusDone, res.Status)
	require.Equal(t, RunFailed, status)
	require.Equal(t, OutcomeFailed, res.State.Outcome.Get())
	log := logText(res.State)
	require.Contains(t, log, "build verification failed on main at ")
	require.Contains(t, log, "bisect: build 1, prefix 0 of 1: fails")
	require.Contains(t, log, "main fails its build verification and no integrated task explains it: go test ./... exited with code 1")
	require.True(t, strings.HasPrefix(res.State.OutcomeReason.Get(), "main fails its build verification and no integrated task explains it: go test ./... exited with code 1"), res.State.OutcomeReason.Get())
	require.Equal(t, []string{"run-1/T1/1"}, trailers(t, dir), "the try stays integrated")
}

// A project whose verify command fails before its first task (its files
// come with the tasks) still has the try that broke the build command
// found: each prefix is judged by the build command alone, which is what
// failed on main.
func TestBuildBisectsByTheCheckThatFailed(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{
		"T1": {"f1.txt": "one\n"}, "T2": {"f2.txt": "BAD\n"}, "T3": {"f3.txt": "three\n"},
	}}
	p := newTestPipeline(t, dir, w, planOf(
		task("T1", "One", []string{"f1.txt"}, ""), task("T2", "Two", []string{"f2.txt"}, ""), task("T3", "Three", []string{"f3.txt"}, "")))
	p.Workers, p.MaxAttempts = 3, 1
	p.VerifyCommand = []string{"sh", "-c", "ls f*.txt"}
	p.BuildCommand = []string{"sh", "-c", "! grep -l BAD f*.txt 2>/dev/null"}
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	pausedFor(t, res, status, "T2", ReasonBuild)
	log := logText(res.State)
	require.Contains(t, log, "T2/1 broke main")
	require.NotContains(t, log, "no integrated task explains it")
	require.Empty(t, showFile(t, dir, "main", "f2.txt"), "the culprit is out of main")
	require.Equal(t, "three\n", showFile(t, dir, "main", "f3.txt"))
}

// A build that fails once and passes when run again (a flaky test) blames
// no one: the bisection builds the whole branch again before it reverts
// the last try, which stays, and the run completes.
func TestBuildFailingOnceRevertsNothing(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo}}}
	p := newTestPipeline(t, dir, w, planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go")))
	mark := filepath.Join(t.TempDir(), "failed-once")
	p.BuildCommand = []string{"sh", "-c", "test -f " + mark + " && exit 0; touch " + mark + "; echo 'TestFlaky: timing out'; exit 1"}
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunCompleted, status, logText(res.State))
	log := logText(res.State)
	require.Contains(t, log, "bisect: build 2, main's head "+short(res.State.Head.Get())+" again: passes")
	require.Contains(t, log, "when run again, after it failed once (a flaky test?); nothing is reverted")
	require.NotContains(t, log, "broke main")
	require.Equal(t, []string{"run-1/T1/1"}, trailers(t, dir), "the try stays, with no revert")
	require.Equal(t, res.State.Head.Get(), res.State.Verified.Get())
}

// A retry that breaks main again is blamed again: the rebuild of main
// before blaming is of its head as it is, not of a prefix that reverted
// the first try a second time and so left the retry's files out.
func TestBuildRetryThatBreaksMainAgainIsBlamed(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	onMainOnly := "package calc\n\nimport (\n\t\"os\"\n\t\"strings\"\n\t\"testing\"\n)\n\n" +
		"func TestMul(t *testing.T) {\n\tif wd, _ := os.Getwd(); strings.Contains(wd, \"-build-\") {\n\t\tt.Fatal(\"fails on main\")\n\t}\n}\n"
	w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/mul.go": mulGo, "calc/mul_test.go": onMainOnly}}}
	p := newTestPipeline(t, dir, w, planOf(task("T1", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go")))
	p.MaxAttempts = 2
	p.BuildCommand = []string{"go", "test", "-count=1", "./..."}
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	log := logText(res.State)
	require.Equal(t, RunPaused, status, log)
	require.NotContains(t, log, "a flaky test?")
	require.Equal(t, 2, strings.Count(log, "T1 broke main; reverted it as "), log)
}

// A build that times out on the branch as it was before a batch is not
// called broken: the log says that it timed out there, and the batch
// stays.
func TestBuildTimingOutBeforeABatchSaysSo(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/add.go": addGo}, "T2": {"calc/sub.go": subGo}}}
	p := newTestPipeline(t, dir, w, planOf(task("T1", "Add", []string{"calc/add.go"}, ""), task("T2", "Sub", []string{"calc/sub.go"}, "", "T1")))
	p.VerifyCommand = []string{"go", "build", "./..."}
	p.BuildCommand = []string{"sleep", "30"}
	p.VerifyOpts.Timeout = 1500 * time.Millisecond
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunFailed, status)
	log := logText(res.State)
	require.Contains(t, log, "main failed before these attempts too: sleep 30 timed out after ")
	require.NotContains(t, log, "broken before")
	require.Equal(t, []string{"run-1/T1/1", "run-1/T2/1"}, trailers(t, dir), "the tries stay integrated")
}

// Without a build or verify command, build verification has nothing to
// run and passes.
func TestBuildWithoutCommands(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/add.go": addGo}, "T2": {"calc/sub.go": subGo}}}
	p := newTestPipeline(t, dir, w, planOf(task("T1", "Add", []string{"calc/add.go"}, ""), task("T2", "Sub", []string{"calc/sub.go"}, "")))
	p.VerifyCommand = nil
	p.Workers = 2
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunCompleted, status)
	require.Contains(t, logText(res.State), "build verification passed on main (no build or verify command)")
	require.Equal(t, []string{"run-1/T1/1", "run-1/T2/1"}, trailers(t, dir))
	require.Contains(t, logText(res.State), "T1 passed its tests (no tests to run)")
}

// An aborted run's build verification does nothing.
func TestBuildVerificationAfterAbort(t *testing.T) {
	t.Parallel()
	p := &Pipeline{}
	var s State
	s.Outcome.Set(OutcomeAborted)
	u, err := p.buildVerification(context.Background(), s)
	require.NoError(t, err)
	require.Empty(t, u.Log.Items())
	next, err := p.buildRouter(context.Background(), s)
	require.NoError(t, err)
	require.Equal(t, graph.END, next)
}

func TestFirstMeaningful(t *testing.T) {
	t.Parallel()
	require.Equal(t, "calc/a.go:3:2: undefined: x", firstMeaningful("# example.com/tiny/calc\n\n$ go vet\ncalc/a.go:3:2: undefined: x\nmore\n"))
	require.Empty(t, firstMeaningful("# pkg\n\n"))
	require.Equal(t, strings.Repeat("x", 160)+"…", firstMeaningful(strings.Repeat("x", 200)))
}

// A try whose tests pass only thanks to a file git ignores, which its
// worker left in its worktree, is not taken for a passing main: main is
// checked on a clean checkout before the run ends, the try is found and
// reverted, and the run does not end completed.
func TestIgnoredFileInTheWorktreeDoesNotPassMain(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, map[string]string{".gitignore": "*_gen.go\n"})
	negGen := "package calc\n\nfunc neg(a int) int { return -a }\n"
	subNeg := "package calc\n\n// Sub returns a-b.\nfunc Sub(a, b int) int { return a + neg(b) }\n"
	w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/add.go": addGo}, "T2": {"calc/neg_gen.go": negGen, "calc/sub.go": subNeg}}}
	p := newTestPipeline(t, dir, w, planOf(task("T1", "Add", []string{"calc/add.go"}, ""), task("T2", "Sub", []string{"calc/sub.go"}, "")))
	p.MaxAttempts = 1
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.NotEqual(t, RunCompleted, status, logText(res.State))
	log := logText(res.State)
	require.Contains(t, log, "T2 passed its tests and was integrated as ")
	require.Contains(t, log, "build verification failed on main at ")
	require.Contains(t, log, "T2 attempt 1: worker finished (done); it left files git ignores, which main will not have: calc/neg_gen.go\n")
	require.Contains(t, log, "T2 broke main; reverted it as ")
	ps := payloads(t, res)
	require.Len(t, ps, 1)
	require.Equal(t, "T2", ps[0].TaskID)
	require.Contains(t, ps[0].Error, "undefined: neg")
	require.Empty(t, showFile(t, dir, "main", "calc/sub.go"), "the try is out of main")
	require.Equal(t, addGo, showFile(t, dir, "main", "calc/add.go"), "the try before it stays")
}

// A build command that outlives verify.timeout is said to have timed out,
// not to have exited with code -1.
func TestBuildTimeoutSaysSo(t *testing.T) {
	t.Parallel()
	p := &Pipeline{BuildCommand: []string{"sleep", "30"}, VerifyOpts: &verify.Opts{Timeout: 200 * time.Millisecond}}
	failure, err := p.checkBuild(context.Background(), t.TempDir())
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(failure, "sleep 30 timed out after "), failure)
	require.Contains(t, strings.SplitN(failure, "\n", 2)[0], "(verify.timeout) and was killed")
}

// What the user commits on main during a run is verified with the run's
// own work: a task they mark fixed by hand with a commit that fails its
// tests does not end the run completed, and the run's own tasks, which
// pass without that commit, are not reverted for it.
func TestBuildVerificationChecksCommitsMadeOutsideTheRun(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{
		"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
		"T2": {"calc/mul.go": mulWrongGo, "calc/mul_test.go": mulTestGo},
	}}
	p := newTestPipeline(t, dir, w, planOf(
		task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"),
		task("T2", "Mul", []string{"calc/mul.go"}, "calc/mul_test.go", "T1"),
	))
	p.MaxAttempts = 1
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunPaused, status, logText(res.State))

	// The user's fix of T2 still fails its test.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "calc/mul.go"), []byte(mulWrongGo), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "calc/mul_test.go"), []byte(mulTestGo), 0o644))
	testkit.Git(t, dir, "add", "calc")
	testkit.Git(t, dir, "commit", "-q", "-m", "fix mul by hand")
	res, status = h.review(res, func(EscalationPayload) Decision { return Decision{Action: ActionFixed} })
	require.Equal(t, RunFailed, status, logText(res.State))
	log := logText(res.State)
	require.Contains(t, log, "build verification failed on main at ")
	require.Contains(t, log, "commits made on main outside the run broke it")
	require.Contains(t, res.State.OutcomeReason.Get(), "commits made on main outside the run broke it, and are yours to fix: 1 of 2 tests failed")
	require.NotContains(t, log, "passed before")
	require.Equal(t, []string{"run-1/T1/1"}, trailers(t, dir), "T1 is not reverted")
}
