package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/worktree"
)

// Registry records runs; *Store implements it.
type Registry interface {
	CreateRun(ctx context.Context, r Run) error
	SetRunStatus(ctx context.Context, id, status string) error
}

// Runner drives pipeline runs on a checkpoint saver.
type Runner struct {
	Pipeline *Pipeline
	Saver    checkpoint.Saver
	Registry Registry
	// StepLimit bounds the super-steps of one call; 0 means 100,000.
	StepLimit int
	// LeaseTTL is how long the run's lease outlives its last renewal; 0
	// means the graph's default. A run whose store stops answering stops
	// when its lease would lapse, so it bounds how long a run waits for the
	// store.
	LeaseTTL time.Duration
	Clock    graph.Clock
	Logger   *slog.Logger
	// Sync, when set, mirrors the run's tasks elsewhere (an issue
	// tracker): it hears every update of the tasks, and all of them when
	// a run resumes, so that it catches up.
	Sync TaskSync

	compiled *graph.Runnable[State]
}

// TaskSync mirrors tasks outside the store. Tasks must not block: a sync
// that is slow or down never slows or fails the run.
type TaskSync interface {
	Tasks(runID string, tasks []planner.Task)
	// Drain waits for what was handed on, at most until ctx ends.
	Drain(ctx context.Context) error
	// IssueID is the ID of a task's issue there, "" until it exists; the
	// run records it on the task (LinearIssueID).
	IssueID(runID, taskID string) string
}

// syncDrainWait bounds how long a run that stops waits for its sync.
const syncDrainWait = 5 * time.Second

// synced returns opts whose EventFunc also hands each update's tasks to
// the sync.
func (r *Runner) synced(runID string, opts *graph.RunOpts) *graph.RunOpts {
	if r.Sync == nil {
		return opts
	}
	o := graph.RunOpts{}
	if opts != nil {
		o = *opts
	}
	next := o.EventFunc
	o.EventFunc = func(e graph.Event) {
		if u, ok := e.Update.(State); ok && e.Kind == graph.EventUpdate && u.Tasks.Len() > 0 {
			r.Sync.Tasks(runID, u.Tasks.Values())
		}
		if next != nil {
			next(e)
		}
	}
	return &o
}

// Runnable returns the compiled pipeline graph.
func (r *Runner) Runnable() (*graph.Runnable[State], error) {
	if r.compiled != nil {
		return r.compiled, nil
	}
	limit := r.StepLimit
	if limit <= 0 {
		limit = 100_000
	}
	r.Pipeline.sync = r.Sync
	run, err := r.Pipeline.Graph().Compile(&graph.CompileOpts{Saver: r.Saver, StepLimit: limit, LeaseTTL: r.LeaseTTL, Clock: r.Clock, Logger: r.Logger})
	if err != nil {
		return nil, fmt.Errorf("compile pipeline: %w", err)
	}
	r.compiled = run
	return run, nil
}

// Start registers a run and drives it until it ends or stops for review.
func (r *Runner) Start(ctx context.Context, run Run, opts *graph.RunOpts) (graph.Result[State], error) {
	g, err := r.Runnable()
	if err != nil {
		return graph.Result[State]{}, err
	}
	run.Status = RunRunning
	in := State{RunID: graph.V(run.ID)}
	if repo := r.Pipeline.Repo; repo != nil {
		// The run integrates into the branch checked out now, whatever is
		// checked out later, and on top of the head it starts from.
		head, err := repo.Head(ctx)
		if err != nil {
			return graph.Result[State]{}, fmt.Errorf("start run %s: %w", run.ID, err)
		}
		in.Branch, in.Head = graph.V(repo.MainBranch()), graph.V(head)
		if run.Meta, err = withTarget(run.Meta, repo.MainBranch(), head); err != nil {
			return graph.Result[State]{}, fmt.Errorf("start run %s: %w", run.ID, err)
		}
	}
	if err := r.Registry.CreateRun(ctx, run); err != nil {
		return graph.Result[State]{}, err
	}
	res, err := g.Invoke(ctx, run.ID, in, r.synced(run.ID, opts))
	return res, r.finish(ctx, run.ID, res, err)
}

// Resume drives a run on from its newest checkpoint, acting on the review
// decisions recorded for it.
func (r *Runner) Resume(ctx context.Context, runID string, opts *graph.RunOpts) (graph.Result[State], error) {
	g, err := r.Runnable()
	if err != nil {
		return graph.Result[State]{}, err
	}
	// Worktrees left behind by a crash are not removed here: the lease is
	// not held yet (another process may be driving the run, in those
	// worktrees), and the interrupted step needs its tries' worktrees
	// (implement resumes in them, verify tests and integrates them). The
	// nodes that run with nothing in flight remove them (cleanWorktrees).
	if r.Sync != nil {
		// What the sync missed while it was down, or the process was
		// gone, is handed on again.
		if st, err := g.State(ctx, runID, -1); err == nil && st.State.Tasks.Len() > 0 {
			r.Sync.Tasks(runID, st.State.Tasks.Values())
		}
	}
	// The run is running again until finish records how it stopped:
	// status, runs and the web page must not show it paused meanwhile,
	// nor offer a resume that would find it busy.
	if err := r.Registry.SetRunStatus(ctx, runID, RunRunning); err != nil {
		return graph.Result[State]{}, err
	}
	res, err := g.Continue(ctx, runID, r.synced(runID, opts))
	return res, r.finish(ctx, runID, res, err)
}

// CatchUp hands a run's tasks to the sync, waits at most wait for it, and
// records the issue IDs it has on the tasks, without running anything: it
// is what resuming a run that ended does. The error says what is still
// behind.
func (r *Runner) CatchUp(ctx context.Context, runID string, wait time.Duration) error {
	if r.Sync == nil {
		return nil
	}
	g, err := r.Runnable()
	if err != nil {
		return err
	}
	st, err := g.State(ctx, runID, -1)
	if err != nil {
		return err
	}
	r.Sync.Tasks(runID, st.State.Tasks.Values())
	dctx, cancel := context.WithTimeout(ctx, wait)
	derr := r.Sync.Drain(dctx)
	cancel()
	if err := r.recordIssues(ctx, runID); err != nil {
		return err
	}
	return derr
}

// recordIssues writes the issue IDs the sync has for a run's tasks, where
// they differ from the state's, in a checkpoint of their own. Only a run
// that nothing drives may be written so: the update drops the pending
// interrupts of a paused run.
func (r *Runner) recordIssues(ctx context.Context, runID string) error {
	g, err := r.Runnable()
	if err != nil {
		return err
	}
	st, err := g.State(ctx, runID, -1)
	if err != nil || len(st.Next) > 0 {
		return err
	}
	tasks := st.State.Tasks.Values()
	r.Pipeline.linkIssues(runID, tasks)
	var u State
	putChanged(&u, st.State, tasks)
	if u.Tasks.Len() == 0 {
		return nil
	}
	_, err = g.UpdateState(ctx, runID, "", u)
	return err
}

func (r *Runner) log() *slog.Logger {
	if r.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Logger
}

// storeFaultStatusWait bounds the status write of a run that stopped
// because of its store.
const storeFaultStatusWait = 5 * time.Second

// finish records the run's status after a call.
func (r *Runner) finish(ctx context.Context, runID string, res graph.Result[State], err error) error {
	if errors.Is(err, checkpoint.ErrThreadBusy) {
		return err // another process drives it; its status is its own
	}
	status := StatusOf(res, err)
	sctx := context.WithoutCancel(ctx)
	if errors.Is(err, checkpoint.ErrStoreUnreachable) || errors.Is(err, checkpoint.ErrLeaseLost) {
		// The store may still be away: try, but do not wait for it again.
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(sctx, storeFaultStatusWait)
		defer cancel()
	}
	if serr := r.Registry.SetRunStatus(sctx, runID, status); serr != nil && err == nil {
		err = serr
	}
	if r.Sync != nil {
		dctx, cancel := context.WithTimeout(sctx, syncDrainWait)
		if derr := r.Sync.Drain(dctx); derr != nil {
			r.log().WarnContext(ctx, "task sync behind", slog.String("run_id", runID), slog.Any("error", derr))
		}
		cancel()
		if err == nil && res.Status == graph.StatusDone {
			// No select_task comes after the end to record the issue
			// IDs found since; a paused run records them when it goes on.
			if lerr := r.recordIssues(sctx, runID); lerr != nil {
				r.log().WarnContext(ctx, "record issue IDs", slog.String("run_id", runID), slog.Any("error", lerr))
			}
		}
	}
	if r.Pipeline.Repo != nil {
		// The worktrees parked for the run's next attempts are not needed
		// until it runs again.
		r.Pipeline.Repo.ReleaseIdle(sctx)
	}
	if err == nil && res.Status == graph.StatusDone && r.Pipeline.Repo != nil {
		// The run ended: its review is over, so the refs that kept its
		// unintegrated attempts for it go.
		if _, derr := r.Pipeline.Repo.DropKept(sctx, runID); derr != nil {
			r.log().WarnContext(ctx, "drop kept attempts", slog.String("run_id", runID), slog.Any("error", derr))
		}
		if remote := r.Pipeline.Remote; remote != "" && r.Pipeline.Dispatcher != nil {
			// The same for what the run shared with its workers.
			if _, derr := r.Pipeline.Repo.DropRemote(sctx, remote, runID); derr != nil {
				r.log().WarnContext(ctx, "drop the run's refs on the remote", slog.String("run_id", runID), slog.String("remote", remote), slog.Any("error", derr))
			}
		}
	}
	return err
}

// withTarget adds the run's target branch and start head to its meta, as
// "target_branch" and "start_head".
func withTarget(meta json.RawMessage, branch, head string) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &m); err != nil {
			return nil, fmt.Errorf("meta: %w", err)
		}
	}
	m["target_branch"], _ = json.Marshal(branch)
	m["start_head"], _ = json.Marshal(head)
	return json.Marshal(m)
}

// StatusOf maps a call's result to a run status.
func StatusOf(res graph.Result[State], err error) string {
	switch {
	case errors.Is(err, worktree.ErrReset):
		// Stopped for the user to restore the branch or accept it; the
		// run resumes from where it stopped.
		return RunInterrupted
	case errors.Is(err, checkpoint.ErrStoreUnreachable), errors.Is(err, checkpoint.ErrLeaseLost):
		// The store went away, or another process took the run over: the
		// run stopped where its last checkpoint is and can be resumed.
		return RunInterrupted
	case errors.Is(err, context.Canceled):
		// Stopped by the user (Ctrl-C, SIGTERM): the step cut short is
		// not checkpointed, so it runs again, as the same attempt, when
		// the run resumes.
		return RunInterrupted
	case err != nil:
		// A step failed (a remote out of reach, a full disk, a bug): the
		// run stopped at its last checkpoint, where resume takes it up
		// once that is fixed. Its tasks have not failed.
		return RunInterrupted
	case res.Status == graph.StatusInterrupted:
		return RunPaused
	case res.Status == graph.StatusDone:
		return EndStatus(res.State)
	}
	return RunRunning
}

// EndStatus is the status of a run that ended with state s: completed,
// partial, aborted or failed.
func EndStatus(s State) string {
	switch s.Outcome.Get() {
	case OutcomeCompleted:
		return completedStatus(s)
	case OutcomeAborted:
		return RunAborted
	}
	return RunFailed
}

// completedStatus tells a run that has nothing left to do apart: completed
// when every task completed, partial when some were skipped or blocked
// (exit code 5), failed when one failed.
func completedStatus(s State) string {
	status := RunCompleted
	for _, t := range s.Tasks.Values() {
		switch t.Status {
		case planner.StatusFailed:
			return RunFailed
		case planner.StatusSkipped, planner.StatusBlocked, planner.StatusPending:
			status = RunPartial
		}
	}
	return status
}

// ExitCode is the process exit code of a run that ended, paused or stopped
// with status: 0 completed, 3 paused for review, 4 failed or
// aborted, 5 partial, 130 interrupted.
func ExitCode(status string) int {
	switch status {
	case RunCompleted:
		return 0
	case RunPaused:
		return 3
	case RunPartial:
		return 5
	case RunInterrupted:
		return 130
	}
	return 4
}
