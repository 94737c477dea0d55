package nodes_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store/storetest"
	"github.com/taskloom/taskloom/verify"
	"github.com/taskloom/taskloom/worktree"
)

// BenchmarkPipelineOverhead measures what the pipeline costs per task, as
// ../shared/bench/WORKLOAD.md says: a run of independent one-file tasks
// with an instant worker, and verify and build commands that are "true",
// against a minimal loop of raw git commands that does the same tasks
// (worktree add -b, write, add, commit --trailer, merge --ff-only,
// worktree remove, branch -d), interleaved in the same benchmark, each
// going first in turn.
//
//   - tasks=40: ms/task is the run's wall time per task, raw_ms/task the
//     raw loop's, ratio_vs_raw the first over the second, git_calls/task the
//     git subprocesses the run started per task.
//   - tasks=300: first_ms/task and last_ms/task are the median time from
//     one worker call to the next over the first and the last tenth of one
//     run, growth the second over the first (raw_growth the raw loop's).
//     Minutes apart on a shared machine, the two ends of a run often see
//     different loads: BenchmarkPipelineGrowth measures the same growth
//     with its two ends interleaved.
func BenchmarkPipelineOverhead(b *testing.B) {
	for _, c := range []struct{ tasks, workers int }{{40, 1}, {40, 4}, {300, 1}} {
		b.Run(fmt.Sprintf("tasks=%d/workers=%d", c.tasks, c.workers), func(b *testing.B) {
			benchPipeline(b, c.tasks, c.workers)
		})
	}
}

func benchPipeline(b *testing.B, tasks, workers int) {
	saver := storetest.NewSQLite(b)
	registry, err := nodes.NewStore(saver)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = registry.Close() })

	var ours, raw benchTimes
	n := 0
	for b.Loop() {
		b.StopTimer()
		oursDir, rawDir := benchRepo(b), benchRepo(b)
		b.StartTimer()
		if n%2 == 0 {
			ours.add(benchRun(b, saver, registry, fmt.Sprintf("bench-%d", n), oursDir, 0, tasks, workers))
			raw.add(benchRawLoop(b, rawDir, 0, tasks))
		} else {
			raw.add(benchRawLoop(b, rawDir, 0, tasks))
			ours.add(benchRun(b, saver, registry, fmt.Sprintf("bench-%d", n), oursDir, 0, tasks, workers))
		}
		n++
	}
	per := float64(n * tasks)
	b.ReportMetric(ours.wall.Seconds()*1000/per, "ms/task")
	b.ReportMetric(raw.wall.Seconds()*1000/per, "raw_ms/task")
	b.ReportMetric(float64(ours.wall)/float64(raw.wall), "ratio_vs_raw")
	b.ReportMetric(float64(ours.gitCalls)/per, "git_calls/task")
	if tasks >= growthTasks {
		ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(n) }
		b.ReportMetric(ms(ours.first), "first_ms/task")
		b.ReportMetric(ms(ours.last), "last_ms/task")
		b.ReportMetric(float64(ours.last)/float64(ours.first), "growth")
		b.ReportMetric(float64(raw.last)/float64(raw.first), "raw_growth")
	}
}

// BenchmarkPipelineGrowth measures how the per-task cost grows with the
// repository, with the two ends of the comparison interleaved in time: a
// repository aged once (untimed) by a run of 270 tasks is copied for each
// iteration, and the same 30-task run (ms/task, as in
// BenchmarkPipelineOverhead) is timed on the copy, "aged", and on a new
// repository, "fresh", each going first in turn. growth is aged over
// fresh: the cost of tasks 271 to 300 against tasks 1 to 30. The raw git
// loop does the same (raw_growth), as a yardstick: what git alone costs
// more as the repository grows. A run's start on a repository of 270
// files (its first worktree is a full checkout) weighs on ms/task over
// only 30 tasks: step_growth leaves the start out, as the median time
// from one worker call to the next, aged over fresh.
func BenchmarkPipelineGrowth(b *testing.B) {
	const aged, tasks = 270, 30
	saver := storetest.NewSQLite(b)
	registry, err := nodes.NewStore(saver)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = registry.Close() })
	b.StopTimer()
	old := benchRepo(b)
	benchRun(b, saver, registry, "age", old, 0, aged, 1)
	rawOld := benchRepo(b)
	benchRawLoop(b, rawOld, 0, aged)
	b.StartTimer()

	var fresh, older, rawFresh, rawOlder time.Duration
	var freshSteps, olderSteps []time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		dirs := []string{benchRepo(b), benchCopy(b, old), benchRepo(b), benchCopy(b, rawOld)}
		b.StartTimer()
		runs := []func(){
			func() {
				w, marks, _ := benchRun(b, saver, registry, fmt.Sprintf("fresh-%d", n), dirs[0], 0, tasks, 1)
				fresh += w
				freshSteps = appendSteps(freshSteps, marks)
			},
			func() {
				w, marks, _ := benchRun(b, saver, registry, fmt.Sprintf("aged-%d", n), dirs[1], aged, tasks, 1)
				older += w
				olderSteps = appendSteps(olderSteps, marks)
			},
			func() { w, _, _ := benchRawLoop(b, dirs[2], 0, tasks); rawFresh += w },
			func() { w, _, _ := benchRawLoop(b, dirs[3], aged, tasks); rawOlder += w },
		}
		if n%2 == 1 {
			runs[0], runs[1], runs[2], runs[3] = runs[1], runs[0], runs[3], runs[2]
		}
		for _, run := range runs {
			run()
		}
		n++
	}
	per := float64(n * tasks)
	b.ReportMetric(fresh.Seconds()*1000/per, "fresh_ms/task")
	b.ReportMetric(older.Seconds()*1000/per, "aged_ms/task")
	b.ReportMetric(float64(older)/float64(fresh), "growth")
	b.ReportMetric(float64(median(olderSteps))/float64(median(freshSteps)), "step_growth")
	b.ReportMetric(float64(rawOlder)/float64(rawFresh), "raw_growth")
}

// appendSteps appends the times from one worker call to the next.
func appendSteps(steps []time.Duration, marks []time.Time) []time.Duration {
	for i := 1; i < len(marks); i++ {
		steps = append(steps, marks[i].Sub(marks[i-1]))
	}
	return steps
}

// median returns the median of d, which it sorts.
func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// benchCopy copies the repository at src to a new folder, untimed.
func benchCopy(b *testing.B, src string) string {
	b.Helper()
	dst := filepath.Join(b.TempDir(), "repo")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		b.Fatal(err)
	}
	// The copy's files have new inodes and times: refreshed, the index
	// is as a user's, and no run pays for re-reading them.
	benchGit(b, dst, "update-index", "--really-refresh", "-q")
	return dst
}

// growthTasks is the smallest run whose growth is reported: its tenths
// must hold enough tasks for a median.
const growthTasks = 100

// benchTimes sums what the runs of one side took.
type benchTimes struct {
	wall        time.Duration
	gitCalls    int64
	first, last time.Duration // median per task over the first and last tenth
}

func (t *benchTimes) add(wall time.Duration, marks []time.Time, gitCalls int64) {
	t.wall += wall
	t.gitCalls += gitCalls
	if len(marks) < growthTasks {
		return
	}
	w := len(marks) / 10
	t.first += median(appendSteps(nil, marks[:w+1]))
	t.last += median(appendSteps(nil, marks[len(marks)-1-w:]))
}

// benchRun runs the pipeline once on tasks independent tasks, the first
// numbered first, in the repository dir and returns its wall time, when
// each worker call started, and the git subprocesses it started.
func benchRun(b *testing.B, saver checkpoint.Saver, registry *nodes.Store, runID, dir string, first, tasks, workers int) (time.Duration, []time.Time, int64) {
	b.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var marks []time.Time
	worker := agent.WorkerFunc(func(_ context.Context, job agent.Job) (agent.Outcome, error) {
		mu.Lock()
		marks = append(marks, time.Now())
		mu.Unlock()
		for _, f := range job.Task.FilesToCreate {
			if err := os.WriteFile(filepath.Join(job.Worktree, f), []byte(job.Task.ID+"\n"), 0o644); err != nil {
				return agent.Outcome{}, err
			}
		}
		return agent.Outcome{Status: agent.OutcomeDone, Summary: "wrote " + job.Task.ID}, nil
	})
	calls := proc.Started("git")
	start := time.Now()
	repo, err := worktree.Open(ctx, dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	p := &nodes.Pipeline{
		RunID:         runID,
		PlanFunc:      func(context.Context) (*planner.Plan, error) { return planner.Build(benchPlan(first, tasks), nil) },
		Repo:          repo,
		Worker:        worker,
		VerifyCommand: []string{"true"}, VerifyOpts: &verify.Opts{Timeout: time.Minute},
		BuildCommand: []string{"true"},
		Workers:      workers,
		MaxAttempts:  1,
	}
	runner := &nodes.Runner{Pipeline: p, Saver: saver, Registry: registry}
	res, err := runner.Start(ctx, nodes.Run{ID: runID, ProductPath: filepath.Join(dir, "PRODUCT.md"), Repo: dir}, nil)
	wall := time.Since(start)
	calls = proc.Started("git") - calls
	if err != nil {
		b.Fatal(err)
	}
	if got := res.State.Outcome.Get(); got != nodes.OutcomeCompleted {
		b.Fatalf("run %s ended %q, want %q", runID, got, nodes.OutcomeCompleted)
	}
	if got := len(res.State.Integrated.Items()); got != tasks {
		b.Fatalf("run %s integrated %d tasks, want %d", runID, got, tasks)
	}
	return wall, marks, calls
}

// benchRawLoop does the same tasks as benchRun with the fewest git
// commands, in the repository dir whose main is checked out as in
// benchRun, and returns its wall time and when each task started.
func benchRawLoop(b *testing.B, dir string, first, tasks int) (time.Duration, []time.Time, int64) {
	b.Helper()
	marks := make([]time.Time, 0, tasks)
	start := time.Now()
	for i := first; i < first+tasks; i++ {
		marks = append(marks, time.Now())
		id := fmt.Sprintf("T%03d", i)
		branch := "raw/" + id
		path := filepath.Join(dir, ".taskloom", "worktrees", "raw-"+id)
		benchGit(b, dir, "worktree", "add", "-q", "-b", branch, path, "main")
		if err := os.WriteFile(filepath.Join(path, fmt.Sprintf("f%03d.txt", i)), []byte(id+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		benchGit(b, path, "add", "-A")
		benchGit(b, path, "commit", "-q", "-m", id+": Write a file", "--trailer", "Taskloom-Task: raw/"+id+"/1")
		benchGit(b, dir, "merge", "-q", "--ff-only", branch)
		benchGit(b, dir, "worktree", "remove", path)
		benchGit(b, dir, "branch", "-q", "-d", branch)
	}
	return time.Since(start), marks, 0
}

// benchPlan is tasks independent tasks, each creating one file, numbered
// from first.
func benchPlan(first, tasks int) *planner.RawPlan {
	raw := &planner.RawPlan{Milestones: []planner.RawMilestone{{ID: "M1", Name: "Files", Description: "One file per task"}}}
	for i := first; i < first+tasks; i++ {
		f := fmt.Sprintf("f%03d.txt", i)
		raw.Tasks = append(raw.Tasks, planner.RawTask{
			ID:                 fmt.Sprintf("T%03d", i),
			Title:              "Write " + f,
			UserStory:          "As a benchmark I want " + f + " so that the task has work",
			AcceptanceCriteria: []string{f + " exists"},
			FilesToCreate:      []string{f},
			MilestoneID:        "M1",
			Priority:           planner.PriorityMedium,
		})
	}
	return raw
}

// benchRepo makes a git repo with one commit on main, checked out, and
// .taskloom/ excluded.
func benchRepo(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# bench\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	benchGit(b, dir, "init", "-q", "-b", "main")
	benchGit(b, dir, "add", "-A")
	benchGit(b, dir, "commit", "-q", "-m", "init")
	if err := os.WriteFile(filepath.Join(dir, ".git", "info", "exclude"), []byte(".taskloom/\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

// benchGit runs git in dir as a user would, with an identity.
func benchGit(b *testing.B, dir string, args ...string) {
	b.Helper()
	env := append(worktree.GitEnv(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com")
	res, err := proc.Run(context.Background(), proc.Cmd{Args: append([]string{"git"}, args...), Dir: dir, Env: env})
	if err != nil {
		b.Fatal(err)
	}
	if res.ExitCode != 0 {
		b.Fatalf("git %s: exit %d: %s", strings.Join(args, " "), res.ExitCode, res.Stderr)
	}
}
