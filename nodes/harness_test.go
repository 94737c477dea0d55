package nodes

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/verify"
	"github.com/taskloom/taskloom/worktree"
)

// The pipeline's tests run on a real git repository holding a tiny Go
// module, with real `go test` runs as the verify command.

const testRunID = "run-1"

// goTest is the verify command of the tiny modules.
var goTest = []string{"go", "test", "./..."}

// baseFiles is the tiny module every test repository starts with.
var baseFiles = map[string]string{
	"go.mod":       "module example.com/tiny\n\ngo 1.21\n",
	"calc/calc.go": "// Package calc is a tiny module for the pipeline's tests.\npackage calc\n",
}

// newTestRepo makes a git repository in a temporary folder with the files
// (plus baseFiles) committed on main, main checked out and .taskloom/
// excluded, as `taskloom init` leaves it.
func newTestRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	all := maps.Clone(baseFiles)
	maps.Copy(all, files)
	testkit.WriteFiles(t, dir, all)
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "init")
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".git", "info", "exclude"), []byte(".taskloom/\n"), 0o644))
	return dir
}

// gitT runs git in dir as a user would, with an identity, and returns its
// trimmed output.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(testkit.Git(t, dir, args...))
}

// trailers returns the Taskloom-Task trailers of main's commits, oldest
// first: one per integration.
func trailers(t testing.TB, dir string) []string {
	t.Helper()
	out := gitT(t, dir, "log", "--reverse", "--format=%(trailers:key=Taskloom-Task,valueonly,separator=%x2C)", "main")
	var got []string
	for l := range strings.Lines(out) {
		if l = strings.TrimSpace(l); l != "" {
			got = append(got, l)
		}
	}
	return got
}

// showFile returns a file of a commit-ish, or "" when it has none.
func showFile(t testing.TB, dir, rev, name string) string {
	t.Helper()
	res, err := proc.Run(context.Background(), proc.Cmd{Args: []string{"git", "show", rev + ":" + name}, Dir: dir, Env: worktree.GitEnv()})
	require.NoError(t, err)
	if res.ExitCode != 0 {
		return ""
	}
	return res.Stdout
}

// task returns a pending task creating files, with its test file.
func task(id, title string, create []string, test string, deps ...string) planner.Task {
	t := planner.Task{ID: id, Title: title, FilesToCreate: create, Dependencies: deps, MilestoneID: "M1", EstimatedMinutes: 2}
	if test != "" {
		t.TestFiles = []string{test}
	}
	return t
}

// planOf is a plan of one milestone holding tasks.
func planOf(tasks ...planner.Task) *planner.Plan {
	return &planner.Plan{Milestones: []planner.Milestone{{ID: "M1", Name: "Calc"}}, Tasks: tasks}
}

// Code of the tiny module's tasks.
const (
	addGo       = "package calc\n\n// Add returns a+b.\nfunc Add(a, b int) int { return a + b }\n"
	addTestGo   = "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2, 3) != 5\")\n\t}\n}\n"
	mulGo       = "package calc\n\n// Mul returns a*b.\nfunc Mul(a, b int) int { return a * b }\n"
	mulWrongGo  = "package calc\n\n// Mul returns a*b.\nfunc Mul(a, b int) int { return a + b }\n"
	mulTestGo   = "package calc\n\nimport \"testing\"\n\nfunc TestMul(t *testing.T) {\n\tif got := Mul(3, 4); got != 12 {\n\t\tt.Fatalf(\"Mul(3, 4) = %d, want 12\", got)\n\t}\n}\n"
	subGo       = "package calc\n\n// Sub returns a-b.\nfunc Sub(a, b int) int { return a - b }\n"
	subTestGo   = "package calc\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) {\n\tif Sub(5, 3) != 2 {\n\t\tt.Fatal(\"Sub(5, 3) != 2\")\n\t}\n}\n"
	negGo       = "package calc\n\n// Neg returns -a.\nfunc Neg(a int) int { return -a }\n"
	negTestGo   = "package calc\n\nimport \"testing\"\n\nfunc TestNeg(t *testing.T) {\n\tif Neg(2) != -2 {\n\t\tt.Fatal(\"Neg(2) != -2\")\n\t}\n}\n"
	helperOneGo = "package calc\n\nfunc helper() int { return 1 }\n\n// One is 1.\nfunc One() int { return helper() }\n"
	helperTwoGo = "package calc\n\nfunc helper() int { return 2 }\n\n// Two is 2.\nfunc Two() int { return helper() }\n"
	helperTwoOK = "package calc\n\nfunc helperTwo() int { return 2 }\n\n// Two is 2.\nfunc Two() int { return helperTwo() }\n"
)

// fileWorker is a worker that writes, for each attempt, the files its
// script gives: by "TASK/ATTEMPT", else by "TASK". It records the jobs it
// was given.
type fileWorker struct {
	mu     sync.Mutex
	script map[string]map[string]string
	// outcome, by "TASK/ATTEMPT", replaces the outcome done on the
	// attempt's first call; a second (the attempt going on after a crash
	// or a provider that stopped it) is done.
	outcome map[string]agent.Outcome
	jobs    []agent.Job
	calls   map[string]int
}

func (w *fileWorker) Implement(_ context.Context, job agent.Job) (agent.Outcome, error) {
	key := fmt.Sprintf("%s/%d", job.Task.ID, job.Attempt)
	w.mu.Lock()
	w.jobs = append(w.jobs, job)
	files, ok := w.script[key]
	if !ok {
		files = w.script[job.Task.ID]
	}
	if w.calls == nil {
		w.calls = map[string]int{}
	}
	w.calls[key]++
	out, custom := w.outcome[key]
	custom = custom && w.calls[key] == 1
	w.mu.Unlock()
	for name, content := range files {
		path := filepath.Join(job.Worktree, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return agent.Outcome{}, err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return agent.Outcome{}, err
		}
	}
	if custom {
		return out, nil
	}
	return agent.Outcome{Status: agent.OutcomeDone, Summary: "wrote " + key, Usage: agent.Usage{InputTokens: 100, OutputTokens: 10}}, nil
}

// job returns the job of an attempt the worker was given.
func (w *fileWorker) job(t testing.TB, taskID string, attempt int) agent.Job {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	i := slices.IndexFunc(w.jobs, func(j agent.Job) bool { return j.Task.ID == taskID && j.Attempt == attempt })
	require.GreaterOrEqual(t, i, 0, "no job for %s/%d", taskID, attempt)
	return w.jobs[i]
}

// newTestPipeline returns a pipeline on the repository in dir that plans
// plan, runs w and verifies with go test.
func newTestPipeline(t *testing.T, dir string, w agent.Worker, plan *planner.Plan) *Pipeline {
	t.Helper()
	repo, err := worktree.Open(context.Background(), dir, nil)
	require.NoError(t, err)
	return &Pipeline{
		RunID: testRunID,
		PlanFunc: func(context.Context) (*planner.Plan, error) {
			cp := *plan
			cp.Tasks = slices.Clone(plan.Tasks)
			return &cp, nil
		},
		Repo:          repo,
		Worker:        w,
		VerifyCommand: goTest,
		VerifyOpts:    &verify.Opts{Timeout: 2 * time.Minute},
		Workers:       1,
		MaxAttempts:   3,
	}
}

// harness drives a pipeline through its Runner on a store driver, and
// follows its events as run --json does.
type harness struct {
	t      *testing.T
	dir    string
	p      *Pipeline
	runner *Runner
	store  *Store
	driver store.Driver

	mu      sync.Mutex
	tracker *Tracker
	events  []RunEvent
	nodes   []string // the nodes that ran, in order
}

func newHarness(t *testing.T, dir string, p *Pipeline, d store.Driver) *harness {
	t.Helper()
	st, err := NewStore(d)
	require.NoError(t, err)
	h := &harness{t: t, dir: dir, p: p, store: st, driver: d, tracker: &Tracker{RunID: p.RunID}}
	h.runner = &Runner{Pipeline: p, Saver: d, Registry: st}
	return h
}

func (h *harness) opts() *graph.RunOpts {
	return &graph.RunOpts{EventFunc: func(e graph.Event) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if e.Kind == graph.EventUpdate {
			h.nodes = append(h.nodes, e.Node)
		}
		h.events = append(h.events, h.tracker.Graph(e)...)
	}}
}

// start starts the run and returns its result and stored status.
func (h *harness) start() (graph.Result[State], string) {
	h.t.Helper()
	ctx := context.Background()
	res, err := h.runner.Start(ctx, Run{ID: h.p.RunID, ProductPath: filepath.Join(h.dir, "PRODUCT.md"), Repo: h.dir}, h.opts())
	require.NoError(h.t, err)
	return res, h.status()
}

// review answers every pending interrupt with the decision decide gives
// its payload, then resumes the run.
func (h *harness) review(res graph.Result[State], decide func(EscalationPayload) Decision) (graph.Result[State], string) {
	h.t.Helper()
	ctx := context.Background()
	require.Equal(h.t, graph.StatusInterrupted, res.Status, "the run waits for a review")
	g, err := h.runner.Runnable()
	require.NoError(h.t, err)
	values := map[string]any{}
	for _, in := range res.Interrupts {
		var p EscalationPayload
		require.NoError(h.t, in.Decode(&p))
		values[in.ID] = decide(p)
	}
	require.NoError(h.t, g.Answer(ctx, h.p.RunID, values))
	res, err = h.runner.Resume(ctx, h.p.RunID, h.opts())
	require.NoError(h.t, err)
	return res, h.status()
}

func (h *harness) status() string {
	h.t.Helper()
	run, err := h.store.Run(context.Background(), h.p.RunID)
	require.NoError(h.t, err)
	return run.Status
}

// payloads decodes the pending interrupts.
// pausedFor checks that the run paused for the review of one task, for
// reason, and returns what the reviewer is shown.
func pausedFor(t testing.TB, res graph.Result[State], status, taskID, reason string) EscalationPayload {
	t.Helper()
	require.Equal(t, RunPaused, status, logText(res.State))
	ps := payloads(t, res)
	require.Len(t, ps, 1)
	require.Equal(t, taskID, ps[0].TaskID)
	require.Equal(t, reason, ps[0].Reason)
	return ps[0]
}

func payloads(t testing.TB, res graph.Result[State]) []EscalationPayload {
	t.Helper()
	var out []EscalationPayload
	for _, in := range res.Interrupts {
		var p EscalationPayload
		require.NoError(t, in.Decode(&p))
		out = append(out, p)
	}
	return out
}

// eventsOf returns the events of type typ, as "TASK/ATTEMPT" plus what
// the type says.
func (h *harness) eventsOf(typ string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		if e.Type != typ {
			continue
		}
		switch typ {
		case EventTaskVerified:
			out = append(out, fmt.Sprintf("%s/%d passed=%v", e.TaskID, e.Attempt, e.Passed))
		case EventTaskIntegrated:
			out = append(out, fmt.Sprintf("%s/%d", e.TaskID, e.Attempt))
		case EventTaskEscalated:
			out = append(out, e.TaskID+" "+e.Reason)
		case EventTaskStarted:
			out = append(out, fmt.Sprintf("%s/%d worker %d", e.TaskID, e.Attempt, e.Worker))
		default:
			out = append(out, e.TaskID)
		}
	}
	return out
}

// logText is the run's log, one entry a line.
func logText(s State) string {
	var b strings.Builder
	for _, e := range s.Log.Items() {
		b.WriteString(e.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

func taskStatus(t testing.TB, s State, id string) planner.Status {
	t.Helper()
	task, ok := s.Tasks.Get(id)
	require.True(t, ok, "no task %s", id)
	return task.Status
}
