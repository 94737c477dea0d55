package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/store/storetest"
	"github.com/taskloom/taskloom/worktree"
)

// The run's registry entry and its checkpoints go through the store seam:
// a run paused for review in one process is resumed by another (a new
// Runner on the same database) on every driver.
func TestRunnerPausesAndResumesOnEachDriver(t *testing.T) {
	t.Parallel()
	storetest.ForEachDriver(t, func(t *testing.T, newDriver storetest.NewDriverFunc) {
		t.Parallel()
		d := newDriver(t)
		dir := newTestRepo(t, nil)
		start := gitT(t, dir, "rev-parse", "main")
		newWorker := func() *fileWorker {
			return &fileWorker{
				script:  map[string]map[string]string{"T1/2": {"calc/add.go": addGo, "calc/add_test.go": addTestGo}},
				outcome: map[string]agent.Outcome{"T1/1": {Status: agent.OutcomeQuestion, Question: "signed?"}},
			}
		}
		plan := planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"))
		h := newHarness(t, dir, newTestPipeline(t, dir, newWorker(), plan), d)
		res, status := h.start()
		require.Equal(t, RunPaused, status)
		run, err := h.store.Run(context.Background(), testRunID)
		require.NoError(t, err)
		var meta map[string]string
		require.NoError(t, json.Unmarshal(run.Meta, &meta))
		require.Equal(t, map[string]string{"target_branch": "main", "start_head": start}, meta)

		// Another process: a new pipeline, runner and worker on the same
		// database.
		w2 := newWorker()
		h2 := newHarness(t, dir, newTestPipeline(t, dir, w2, plan), d)
		res, status = h2.review(res, func(EscalationPayload) Decision { return Decision{Action: ActionRetry, Note: "yes"} })
		require.Equal(t, RunCompleted, status)
		require.Equal(t, []string{"run-1/T1/2"}, trailers(t, dir))
		require.Len(t, w2.jobs, 1, "the resumed run does not redo the first attempt")
		require.Equal(t, "main", res.State.Branch.Get())

		// A run with the same ID cannot start again.
		_, err = h2.runner.Start(context.Background(), Run{ID: testRunID, Repo: dir}, nil)
		require.ErrorIs(t, err, ErrRunExists)
	})
}

// A user who resets the target branch under a run stops it; accepting the
// branch as it is redoes the tasks whose commits are gone.
func TestAcceptHeadRedoesWhatTheBranchLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{
		"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo},
		"T2": {"calc/sub.go": subGo, "calc/sub_test.go": subTestGo},
	}}
	plan := planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go"), task("T2", "Sub", []string{"calc/sub.go"}, "calc/sub_test.go"))
	h := newHarness(t, dir, newTestPipeline(t, dir, w, plan), storetest.NewMemory(t))
	res, status := h.start()
	require.Equal(t, RunCompleted, status)
	require.NoError(t, h.runner.CheckHead(ctx, testRunID))
	acc, err := h.runner.AcceptHead(ctx, testRunID)
	require.NoError(t, err)
	require.Equal(t, Accepted{Head: res.State.Head.Get()}, acc, "nothing to take")

	t1, _ := res.State.Attempts.Get("T1/1")
	gitT(t, dir, "reset", "-q", "--hard", t1.Integrated)
	err = h.runner.CheckHead(ctx, testRunID)
	require.ErrorIs(t, err, worktree.ErrReset)
	require.Equal(t, RunInterrupted, StatusOf(graph.Result[State]{}, err))

	acc, err = h.runner.AcceptHead(ctx, testRunID)
	require.NoError(t, err)
	require.Equal(t, Accepted{Head: t1.Integrated, Redo: []string{"T2"}}, acc)
	require.NoError(t, h.runner.CheckHead(ctx, testRunID))

	res, err = h.runner.Resume(ctx, testRunID, h.opts())
	require.NoError(t, err)
	require.Equal(t, RunCompleted, h.status(), logText(res.State))
	require.Equal(t, []string{"run-1/T1/1", "run-1/T2/2"}, trailers(t, dir), "T2 redone as a new attempt, integrated once")
	require.Contains(t, logText(res.State), "accepted main at ")
	gone, _ := res.State.Attempts.Get("T2/1")
	require.Contains(t, gone.Error, "is gone from main (reset or rewritten); the task is redone")

	// A run that has no checkpoint has no head to check.
	require.NoError(t, h.runner.CheckHead(ctx, "run-9"))
	acc, err = h.runner.AcceptHead(ctx, "run-9")
	require.NoError(t, err)
	require.Equal(t, Accepted{}, acc)
}

func TestStartRefusesBadMeta(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	h := newHarness(t, dir, newTestPipeline(t, dir, &fileWorker{}, planOf()), storetest.NewMemory(t))
	_, err := h.runner.Start(context.Background(), Run{ID: testRunID, Meta: json.RawMessage(`[1]`)}, nil)
	require.ErrorContains(t, err, "start run run-1: meta: ")
	_, err = h.store.Run(context.Background(), testRunID)
	require.ErrorIs(t, err, ErrRunNotFound, "a run that cannot start is not registered")
}

// registryFunc records the statuses set.
type registryFunc struct{ statuses []string }

func (r *registryFunc) CreateRun(context.Context, Run) error { return nil }
func (r *registryFunc) SetRunStatus(_ context.Context, _ string, status string) error {
	r.statuses = append(r.statuses, status)
	return nil
}

func TestRunnerFinish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := &registryFunc{}
	r := &Runner{Pipeline: &Pipeline{}, Registry: reg}
	// Another process drives the run: its status is that process's.
	err := r.finish(ctx, "r", graph.Result[State]{}, checkpoint.ErrThreadBusy)
	require.ErrorIs(t, err, checkpoint.ErrThreadBusy)
	require.Empty(t, reg.statuses)
	err = r.finish(ctx, "r", graph.Result[State]{}, fmt.Errorf("save: %w", checkpoint.ErrStoreUnreachable))
	require.ErrorIs(t, err, checkpoint.ErrStoreUnreachable)
	require.NoError(t, r.finish(ctx, "r", graph.Result[State]{Status: graph.StatusInterrupted}, nil))
	require.Equal(t, []string{RunInterrupted, RunPaused}, reg.statuses)
}

func TestStatusOf(t *testing.T) {
	t.Parallel()
	done := func(outcome string, statuses ...planner.Status) graph.Result[State] {
		var s State
		s.Outcome.Set(outcome)
		for i, st := range statuses {
			s.Tasks.Put(fmt.Sprint(i), planner.Task{ID: fmt.Sprint(i), Status: st})
		}
		return graph.Result[State]{Status: graph.StatusDone, State: s}
	}
	for _, tc := range []struct {
		res    graph.Result[State]
		err    error
		status string
		code   int
	}{
		{graph.Result[State]{}, &worktree.ResetError{}, RunInterrupted, 130},
		{graph.Result[State]{}, checkpoint.ErrStoreUnreachable, RunInterrupted, 130},
		{graph.Result[State]{}, checkpoint.ErrLeaseLost, RunInterrupted, 130},
		{graph.Result[State]{}, context.Canceled, RunInterrupted, 130},
		{graph.Result[State]{}, errors.New("boom"), RunInterrupted, 130},
		{graph.Result[State]{Status: graph.StatusInterrupted}, nil, RunPaused, 3},
		{graph.Result[State]{Status: graph.StatusPending}, nil, RunRunning, 4},
		{done(OutcomeCompleted, planner.StatusCompleted), nil, RunCompleted, 0},
		{done(OutcomeCompleted, planner.StatusCompleted, planner.StatusSkipped), nil, RunPartial, 5},
		{done(OutcomeCompleted, planner.StatusBlocked, planner.StatusFailed), nil, RunFailed, 4},
		{done(OutcomeAborted), nil, RunAborted, 4},
		{done(OutcomeFailed), nil, RunFailed, 4},
	} {
		status := StatusOf(tc.res, tc.err)
		require.Equal(t, tc.status, status, "%v %v", tc.err, tc.res.Status)
		require.Equal(t, tc.code, ExitCode(status), status)
	}
}

// WorktreeDiff changes whenever a file in the worktree does, tracked or
// not, and when the worktree's head moves.
func TestWorktreeDiff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newTestRepo(t, nil)
	diff := WorktreeDiff(unconfined)
	clean, err := diff(ctx, dir)
	require.NoError(t, err)
	seen := map[string]bool{clean: true}
	for _, files := range []map[string]string{
		{"calc/new.go": "package calc\n"},
		{"calc/new.go": "package calc\n\n// x\n"},
		{"calc/calc.go": "package calc\n\n// changed\n"},
	} {
		testkit.WriteFiles(t, dir, files)
		d, err := diff(ctx, dir)
		require.NoError(t, err)
		require.False(t, seen[d], "the report changed after writing %v", files)
		seen[d] = true
	}
	// Names git cannot take on a line, and a dangling symlink, are
	// content like any other.
	for _, name := range []string{"\"quoted", "cr\r", "new\nline"} {
		testkit.WriteFiles(t, dir, map[string]string{name: "x\n"})
		d, err := diff(ctx, dir)
		require.NoError(t, err, "after writing %q", name)
		require.False(t, seen[d], "the report changed after writing %q", name)
		seen[d] = true
	}
	require.NoError(t, os.Symlink("../dist/cli.js", filepath.Join(dir, "cli")))
	d, err := diff(ctx, dir)
	require.NoError(t, err, "after a dangling symlink")
	require.False(t, seen[d])
	seen[d] = true
	// A worker that commits its work, as agents do, changed something.
	testkit.Git(t, dir, "add", "-A")
	testkit.Git(t, dir, "commit", "-q", "-m", "work")
	d, err = diff(ctx, dir)
	require.NoError(t, err)
	require.False(t, seen[d], "a commit changes the report")
	_, err = diff(ctx, filepath.Join(dir, "missing"))
	require.Error(t, err)
}

// unconfined runs a test's commands with git pinned to dir and no
// sandbox.
func unconfined(dir string) (proc.Confinement, error) {
	return proc.Confinement{Env: worktree.GitEnvAt(dir)}, nil
}

// A worker that points its worktree's commondir at a git folder of its
// own, whose config names an fsmonitor and an external diff, gets neither
// run by the Ralph loop's look at the worktree between iterations: that
// git runs with taskloom's rights, before the guard puts the worktree's
// metadata back.
func TestWorktreeDiffRunsNothingTheWorkerPlanted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := newTestRepo(t, nil)
	repo, err := worktree.Open(ctx, dir, nil)
	require.NoError(t, err)
	w, err := repo.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	confine := func(d string) (proc.Confinement, error) {
		return repo.Confine(d, worktree.ConfineOpts{EnvAllow: []string{"PATH", "HOME"}, Environ: testkit.GitEnv()})
	}
	diff := WorktreeDiff(confine)
	before, err := diff(ctx, w.Path)
	require.NoError(t, err)

	// The worker's doing: a fake common dir in its admin folder, which it
	// may write, with a config that runs its script.
	outside := filepath.Join(t.TempDir(), "ran")
	script := filepath.Join(w.Path, "evil.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho ran >> "+outside+"\n"), 0o755))
	admin := strings.TrimSpace(gitT(t, w.Path, "rev-parse", "--absolute-git-dir"))
	fake := filepath.Join(admin, "fake")
	copied := filepath.Join(t.TempDir(), "git")
	require.NoError(t, exec.Command("cp", "-r", filepath.Join(dir, ".git"), copied).Run())
	require.NoError(t, os.Rename(copied, fake))
	cfg := "[core]\n\tfsmonitor = " + script + "\n[diff]\n\texternal = " + script + "\n"
	f, err := os.OpenFile(filepath.Join(fake, "config"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(cfg)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, os.WriteFile(filepath.Join(admin, "commondir"), []byte(fake+"\n"), 0o644))
	testkit.WriteFiles(t, w.Path, map[string]string{"README.md": "changed\n"})

	after, _ := diff(ctx, w.Path)
	require.NotEqual(t, before, after)
	_, err = os.Stat(outside)
	require.ErrorIs(t, err, fs.ErrNotExist, "the worker's script ran outside the sandbox")
}

// The store's records are the driver's: a Store over memory reads what
// was written, and a broken history row is reported, not returned.
func TestStoreReportsUndecodableHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := storetest.NewMemory(t)
	require.NoError(t, d.SaveHistory(ctx, store.History{RunID: "r", ConversationID: "r/T1/1", TaskID: "T1", Attempt: 1, UI: "[]", API: "[]", Meta: "{"}))
	s, err := NewStore(d)
	require.NoError(t, err)
	_, err = s.Histories("r").Load(ctx, "r/T1/1")
	require.ErrorContains(t, err, "load conversation r/T1/1: decode metadata")
	for _, row := range []store.History{
		{RunID: "r", ConversationID: "r/T1/2", TaskID: "T1", Attempt: 2, UI: "{", API: "[]", Meta: "{}"},
		{RunID: "r", ConversationID: "r/T1/3", TaskID: "T1", Attempt: 3, UI: "[]", API: "{", Meta: "{}"},
	} {
		require.NoError(t, d.SaveHistory(ctx, row))
		_, err = s.Histories("r").Load(ctx, row.ConversationID)
		require.ErrorContains(t, err, "decode")
	}
	require.NoError(t, d.SaveHistory(ctx, store.History{RunID: "r", ConversationID: "bad", TaskID: "T1", Attempt: 1, UI: "[]", API: "[]", Meta: "{}"}))
	_, err = s.Conversations(ctx, "r", "T1")
	require.ErrorContains(t, err, `conversation id "bad" is not r/TASK_ID/ATTEMPT`)
}

// A process that dies right after an attempt committed (a panic in the
// node, which the graph does not checkpoint) leaves the attempt's worktree
// behind; resumed, the same attempt goes on there, where its commit
// already is, and is integrated once.
func TestAttemptResumesInItsWorktreeAfterACrash(t *testing.T) {
	t.Parallel()
	dir := newTestRepo(t, nil)
	w := &fileWorker{script: map[string]map[string]string{"T1": {"calc/add.go": addGo, "calc/add_test.go": addTestGo}}}
	p := newTestPipeline(t, dir, w, planOf(task("T1", "Add", []string{"calc/add.go"}, "calc/add_test.go")))
	crashed := false
	p.CrashFunc = func(point string) {
		if point == "implement:after_commit" && !crashed {
			crashed = true
			panic("killed after the commit")
		}
	}
	h := newHarness(t, dir, p, storetest.NewMemory(t))
	_, err := h.runner.Start(context.Background(), Run{ID: testRunID, Repo: dir}, h.opts())
	require.ErrorContains(t, err, "killed after the commit")
	require.Equal(t, RunInterrupted, h.status(), "stopped, not ended: resume goes on")

	res, err := h.runner.Resume(context.Background(), testRunID, h.opts())
	require.NoError(t, err)
	require.Equal(t, RunCompleted, h.status(), logText(res.State))
	require.Equal(t, []string{"run-1/T1/1"}, trailers(t, dir), "the same attempt, integrated once")
	require.Len(t, w.jobs, 2)
	require.True(t, w.jobs[0].Restart)
	require.False(t, w.jobs[1].Restart, "the worker resumes its conversation in the attempt's worktree")
	rec, _ := res.State.Attempts.Get("T1/1")
	require.True(t, rec.Changed, "the commit made before the crash counts")
	require.Equal(t, addGo, showFile(t, dir, "main", "calc/add.go"))
}
