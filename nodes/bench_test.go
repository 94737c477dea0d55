package nodes_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store/storetest"
	"github.com/taskloom/taskloom/verify"
	"github.com/taskloom/taskloom/worktree"
)

// benchTasks is the number of independent tasks of a benchmark run.
const benchTasks = 20

// BenchmarkPipelineOverhead measures what the pipeline itself costs per
// task: planning, selection, a worktree per attempt, the commit, the
// checkpoints, the integration into main, the worktree's removal and the
// final build verification. Its worker writes the task's one file and its
// tests and build are "true". One iteration is a whole run of benchTasks
// independent tasks on a new git repo.
//
// ms/task leaves out the worker's time (measured around each call) and the
// verify and build commands' time (each invocation's cost is estimated
// from running "true" beforehand); raw-ms/task is the wall time of the run
// divided by its tasks.
func BenchmarkPipelineOverhead(b *testing.B) {
	for _, store := range []string{"sqlite", "postgres"} {
		b.Run("store="+store, func(b *testing.B) {
			for _, workers := range []int{1, 2} {
				b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
					benchPipeline(b, store, workers)
				})
			}
		})
	}
}

func benchPipeline(b *testing.B, store string, workers int) {
	saver := storetest.New(b, store)
	registry, err := nodes.NewStore(saver)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = registry.Close() })
	ctx := context.Background()

	var workerTime atomic.Int64
	worker := agent.WorkerFunc(func(_ context.Context, job agent.Job) (agent.Outcome, error) {
		start := time.Now()
		defer func() { workerTime.Add(int64(time.Since(start))) }()
		for _, f := range job.Task.FilesToCreate {
			if err := os.WriteFile(filepath.Join(job.Worktree, f), []byte(job.Task.ID+"\n"), 0o644); err != nil {
				return agent.Outcome{}, err
			}
		}
		return agent.Outcome{Status: agent.OutcomeDone, Summary: "wrote " + job.Task.ID}, nil
	})
	commandCost := benchCommandCost(b)

	var wall time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := benchRepo(b)
		repo, err := worktree.Open(ctx, dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		runID := fmt.Sprintf("bench-%d", i)
		p := &nodes.Pipeline{
			RunID:         runID,
			PlanFunc:      func(context.Context) (*planner.Plan, error) { return planner.Build(benchPlan(), nil) },
			Repo:          repo,
			Worker:        worker,
			VerifyCommand: []string{"true"}, VerifyOpts: &verify.Opts{Timeout: time.Minute},
			BuildCommand: []string{"true"},
			Workers:      workers,
			MaxAttempts:  1,
		}
		runner := &nodes.Runner{Pipeline: p, Saver: saver, Registry: registry}
		b.StartTimer()

		start := time.Now()
		res, err := runner.Start(ctx, nodes.Run{ID: runID, ProductPath: filepath.Join(dir, "PRODUCT.md"), Repo: dir}, nil)
		wall += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if got := res.State.Outcome.Get(); got != nodes.OutcomeCompleted {
			b.Fatalf("run %s ended %q, want %q", runID, got, nodes.OutcomeCompleted)
		}
		if got := len(res.State.Integrated.Items()); got != benchTasks {
			b.Fatalf("run %s integrated %d tasks, want %d", runID, got, benchTasks)
		}
	}
	// Each task's verification runs the verify command once; the build
	// verification runs the build and the verify command.
	commands := time.Duration(b.N*(benchTasks+2)) * commandCost
	overhead := wall - time.Duration(workerTime.Load()) - commands
	tasks := float64(b.N * benchTasks)
	b.ReportMetric(float64(overhead)/float64(time.Millisecond)/tasks, "ms/task")
	b.ReportMetric(float64(wall)/float64(time.Millisecond)/tasks, "raw-ms/task")
}

// benchCommandCost returns the mean time of running "true".
func benchCommandCost(b *testing.B) time.Duration {
	b.Helper()
	const n = 20
	start := time.Now()
	for range n {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / n
}

// benchPlan is benchTasks independent tasks, each creating one file.
func benchPlan() *planner.RawPlan {
	raw := &planner.RawPlan{Milestones: []planner.RawMilestone{{ID: "M1", Name: "Files", Description: "One file per task"}}}
	for i := range benchTasks {
		f := fmt.Sprintf("f%02d.txt", i)
		raw.Tasks = append(raw.Tasks, planner.RawTask{
			ID:                 fmt.Sprintf("T%02d", i),
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

// benchRepo makes a git repo with one commit on main.
func benchRepo(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# bench\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", "init"},
	} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return dir
}
