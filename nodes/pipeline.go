package nodes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
	"github.com/taskloom/taskloom/verify"
	"github.com/taskloom/taskloom/worktree"
)

// Node names of the pipeline graph.
const (
	NodeBreakdown         = "task_breakdown"
	NodeSelect            = "select_task"
	NodeImplement         = "implement_task"
	NodeImplementParallel = "implement_tasks_parallel"
	NodeVerify            = "verify_task"
	NodeVerifyParallel    = "verify_tasks_parallel"
	NodeIntegrate         = "integrate"
	NodeBuild             = "build_verification"
	NodeRevert            = "revert_culprits"
	NodeEscalation        = "human_escalation"
)

// Pipeline holds what the pipeline's nodes need.
type Pipeline struct {
	RunID string
	// PlanFunc produces the plan (task_breakdown).
	PlanFunc func(ctx context.Context) (*planner.Plan, error)
	Repo     *worktree.Manager
	Worker   agent.Worker
	// VerifyCommand is the configured test command: run in each attempt's
	// worktree (after the task's own test files) and on the target branch
	// by build_verification.
	VerifyCommand []string
	// VerifyOpts says how the tests run (timeout, confinement).
	VerifyOpts *verify.Opts
	// BuildCommand is run on main by build_verification, before
	// VerifyCommand; empty runs only the tests.
	BuildCommand []string
	Workers      int
	MaxAttempts  int
	// Secrets finds secret values in an attempt's changes, which are then
	// never committed; nil looks for none.
	Secrets *proc.Redactor
	// Dispatcher, when set, queues attempts for workers in this process or
	// on other machines instead of running them here.
	Dispatcher Dispatcher
	// SlotsFunc, when set, says how many attempts the Dispatcher's workers
	// take at once; a batch is as large as that when it exceeds Workers.
	SlotsFunc func(ctx context.Context) int
	// Remote is the git remote shared with workers on other machines:
	// attempts' bases are pushed there and their commits fetched from
	// there. "" means workers share this repository.
	Remote string
	// WorkerTimeout bounds a worker's whole attempt; 0 means no bound.
	WorkerTimeout time.Duration
	Clock         graph.Clock
	Logger        *slog.Logger
	scanned       atomic.Bool // the first select_task scanned for leftovers
	// sync is the Runner's: select_task records the IDs it gives tasks.
	sync TaskSync

	// CrashFunc is called at named points: "select:start",
	// "implement:before_worker", "implement:after_commit",
	// "verify:after_tests", "integrate:before", "integrate:after",
	// "build:before" and "revert:after"; tests use it to kill the process
	// there.
	CrashFunc func(point string)
}

func (p *Pipeline) now() time.Time {
	if p.Clock != nil {
		return p.Clock.Now()
	}
	return time.Now()
}

func (p *Pipeline) crash(point string) {
	if p.CrashFunc != nil {
		p.CrashFunc(point)
	}
}

func (p *Pipeline) log() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

func (p *Pipeline) entry(taskID, format string, args ...any) Entry {
	return Entry{Time: p.now(), TaskID: taskID, Text: fmt.Sprintf(format, args...)}
}

// Graph builds the pipeline graph:
//
//	START -> task_breakdown -> select_task
//	select_task -> implement_task -> verify_task -> integrate            (one task)
//	select_task -> implement_tasks_parallel xN -> verify_tasks_parallel -> integrate
//	integrate -> build_verification | select_task | implement_task (retry) | human_escalation
//	human_escalation -> select_task | END
//	build_verification -> END | select_task | revert_culprits | human_escalation
//	revert_culprits -> build_verification
func (p *Pipeline) Graph() *graph.Graph[State] {
	g := graph.New[State]()
	g.AddNode(NodeBreakdown, p.breakdown, nil)
	g.AddNode(NodeSelect, p.selectTask, nil)
	g.AddNode(NodeImplement, func(ctx context.Context, s State) (State, error) {
		batch := s.Batch.Get()
		if len(batch) != 1 {
			return State{}, fmt.Errorf("implement_task needs one selected task, got %d", len(batch))
		}
		return p.implement(ctx, s, batch[0])
	}, nil)
	graph.AddInputNode(g, NodeImplementParallel, p.implement, nil)
	g.AddNode(NodeVerify, p.verify, nil)
	g.AddNode(NodeVerifyParallel, p.verify, nil)
	g.AddNode(NodeIntegrate, p.integrateBatch, nil)
	g.AddNode(NodeEscalation, p.escalate, nil)
	g.AddNode(NodeBuild, p.buildVerification, nil)
	g.AddNode(NodeRevert, p.revertCulprits, nil)

	g.AddEdge(graph.START, NodeBreakdown)
	g.AddRouter(NodeBreakdown, p.breakdownRouter, NodeSelect, NodeEscalation)
	g.AddFanOut(NodeSelect, p.selectRouter, NodeImplement, NodeImplementParallel, NodeEscalation, NodeBuild)
	g.AddEdge(NodeImplement, NodeVerify)
	g.AddEdge(NodeImplementParallel, NodeVerifyParallel)
	g.AddEdge(NodeVerify, NodeIntegrate)
	g.AddEdge(NodeVerifyParallel, NodeIntegrate)
	g.AddRouter(NodeIntegrate, p.integrateRouter, NodeSelect, NodeImplement, NodeEscalation, NodeBuild)
	g.AddRouter(NodeEscalation, p.escalationRouter, NodeSelect, graph.END)
	g.AddRouter(NodeBuild, p.buildRouter, graph.END, NodeSelect, NodeEscalation, NodeRevert)
	g.AddEdge(NodeRevert, NodeBuild)
	return g
}

func tasksOf(s State) []planner.Task { return s.Tasks.Values() }

// putChanged writes the tasks that differ from the state's.
func putChanged(u *State, s State, tasks []planner.Task) {
	for _, t := range tasks {
		if old, ok := s.Tasks.Get(t.ID); !ok || !taskEqual(old, t) {
			u.Tasks.Put(t.ID, t)
		}
	}
}

func taskEqual(a, b planner.Task) bool {
	return a.Status == b.Status && a.Attempts == b.Attempts && a.Error == b.Error &&
		a.ImplementationNotes == b.ImplementationNotes && a.MaxAttempts == b.MaxAttempts &&
		a.LinearIssueID == b.LinearIssueID
}

// linkIssues gives the tasks the issue IDs the sync has made or found
// since, so that the next checkpoint holds them.
func (p *Pipeline) linkIssues(runID string, tasks []planner.Task) {
	if p.sync == nil {
		return
	}
	for i := range tasks {
		if id := p.sync.IssueID(runID, tasks[i].ID); id != "" {
			tasks[i].LinearIssueID = id
		}
	}
}

func findTask(tasks []planner.Task, id string) *planner.Task {
	for i := range tasks {
		if tasks[i].ID == id {
			return &tasks[i]
		}
	}
	return nil
}

func (p *Pipeline) schedOpts(s State) *scheduler.Opts {
	var order []string
	for _, m := range s.Milestones.Get() {
		order = append(order, m.ID)
	}
	return &scheduler.Opts{MilestoneOrder: order}
}

// breakdown turns PRODUCT.md into the plan.
func (p *Pipeline) breakdown(ctx context.Context, s State) (State, error) {
	var u State
	if s.Tasks.Len() > 0 {
		return u, nil // planned before
	}
	plan, err := p.PlanFunc(ctx)
	if err != nil && !(errors.Is(err, planner.ErrCycle) && plan != nil) {
		return u, err
	}
	u.Milestones.Set(plan.Milestones)
	for _, t := range plan.Tasks {
		if t.Status == "" {
			t.Status = planner.StatusPending
		}
		if t.MaxAttempts == 0 {
			t.MaxAttempts = p.MaxAttempts
		}
		u.Tasks.Put(t.ID, t)
	}
	u.Warnings.Set(plan.Warnings)
	if plan.Usage != (llm.Usage{}) {
		u.PlanUsage.Set(plan.Usage)
	}
	u.Cycles.Set(plan.Cycles)
	u.Log.Add(p.entry("", "planned %s in %s", plural(len(plan.Tasks), "task"), plural(len(plan.Milestones), "milestone")))
	for _, sp := range plan.Splits {
		u.Log.Add(p.entry(sp.TaskID, "split %s (complexity %.1f, %s) by %s into %s", sp.TaskID, sp.Complexity.Total,
			sp.Complexity.Level, sp.Strategy, strings.Join(sp.Parts, ", ")))
	}
	for _, w := range plan.Warnings {
		u.Log.Add(p.entry("", "warning: %s", w))
	}
	// The tasks outside a cycle run first; select_task escalates the
	// cycle's once nothing else can run.
	_, paths := cycleEscalations(plan.Tasks, plan.Cycles)
	for _, path := range paths {
		u.Log.Add(p.entry("", "dependency cycle %s; the tasks outside it run first", path))
	}
	return u, nil
}

// cycleEscalations returns an escalation for each task of a dependency
// cycle, by task ID, and each cycle's path, which names the file behind a
// file-based edge.
func cycleEscalations(tasks []planner.Task, cycles [][]string) (map[string]Escalation, []string) {
	escs := map[string]Escalation{}
	paths := planner.CyclePaths(tasks, cycles)
	for k, c := range cycles {
		for _, id := range c {
			if _, seen := escs[id]; !seen {
				escs[id] = Escalation{TaskID: id, Reason: ReasonCycle, Error: "dependency cycle " + paths[k]}
			}
		}
	}
	return escs, paths
}

func (p *Pipeline) breakdownRouter(_ context.Context, s State) (string, error) {
	if len(s.Escalations.Get()) > 0 {
		return NodeEscalation, nil
	}
	return NodeSelect, nil
}

// finished reports whether no task is left to run.
func finished(tasks []planner.Task) bool {
	for _, t := range tasks {
		if t.Status == planner.StatusPending || t.Status == planner.StatusInProgress {
			return false
		}
	}
	return true
}

// selectTask picks the next task or batch, or finds a deadlock.
func (p *Pipeline) selectTask(ctx context.Context, s State) (State, error) {
	p.crash("select:start")
	var u State
	p.removeFinished(ctx, s)
	tasks := scheduler.Propagate(tasksOf(s))
	p.linkIssues(s.RunID.Get(), tasks)
	u.Batch.Set(nil)
	if finished(tasks) {
		putChanged(&u, s, tasks)
		return u, nil
	}
	n := max(p.Workers, 1)
	if p.SlotsFunc != nil {
		n = max(n, p.SlotsFunc(ctx))
	}
	escs := s.Escalations.Get()
	batch := scheduler.SelectBatch(withoutEscalated(tasks, escs), n, p.schedOpts(s))
	if len(batch) == 0 && len(escs) > 0 {
		// What is left waits on the review: the run pauses for it.
		putChanged(&u, s, tasks)
		return u, nil
	}
	if len(batch) == 0 {
		err := scheduler.Deadlock(tasks)
		var dl *scheduler.DeadlockError
		if errors.As(err, &dl) {
			var escs []Escalation
			inCycle, _ := cycleEscalations(tasks, s.Cycles.Get())
			for _, st := range dl.Stuck {
				if e, ok := inCycle[st.TaskID]; ok {
					escs = append(escs, e)
					continue
				}
				escs = append(escs, Escalation{TaskID: st.TaskID, Reason: ReasonDeadlock, Error: err.Error()})
			}
			u.Escalations.Set(escs)
			u.Log.Add(p.entry("", "%v", err))
		} else if err != nil {
			return u, err
		}
		putChanged(&u, s, tasks)
		return u, nil
	}
	for _, id := range batch {
		var err error
		if tasks, err = scheduler.Start(tasks, id); err != nil {
			return u, err
		}
		t := findTask(tasks, id)
		n := nextAttempt(s, id)
		if a, ok := p.providerStopped(s, id); ok {
			// The provider, not the attempt, failed: the attempt goes on
			// where it stopped.
			a.ProviderError, a.Resumed = "", true
			u.Attempts.Put(attemptKey(id, a.Attempt), a)
			n = a.Attempt
		}
		u.Log.Add(p.entry(id, "started %s (%s): %s", id, AttemptLabel(n, t.Attempts+1, t.MaxAttempts), t.Title))
	}
	putChanged(&u, s, tasks)
	u.Batch.Set(batch)
	return u, nil
}

// escalated reports whether task id waits for a review.
func escalated(s State, id string) bool {
	return slices.ContainsFunc(s.Escalations.Get(), func(e Escalation) bool { return e.TaskID == id })
}

// withoutEscalated returns tasks as selection sees them while escalations
// wait for review: an escalated task is not run again before its review,
// even one left pending (a question, a provider that kept failing), and
// so neither are the tasks that depend on it.
func withoutEscalated(tasks []planner.Task, escs []Escalation) []planner.Task {
	if len(escs) == 0 {
		return tasks
	}
	out := slices.Clone(tasks)
	for i := range out {
		if slices.ContainsFunc(escs, func(e Escalation) bool { return e.TaskID == out[i].ID }) && out[i].Status == planner.StatusPending {
			out[i].Status = planner.StatusBlocked
		}
	}
	return out
}

// cleanWorktrees removes the worktrees of finished tries. It runs where no
// try is in flight (select_task, human_escalation, build_verification), so
// a try's worktree lives until its results are checkpointed.
func (p *Pipeline) cleanWorktrees(ctx context.Context, s State) {
	if p.Repo == nil {
		return
	}
	// Other runs' worktrees are theirs to clean; an attempt the provider
	// stopped goes on in its own after a review's retry.
	removed, err := p.Repo.CleanOrphans(ctx, func(w *worktree.Worktree) bool {
		return p.RunID != "" && w.Run != p.RunID || p.goesOn(s, w.TaskID, w.Attempt)
	})
	if err != nil {
		p.log().WarnContext(ctx, "clean worktrees", slog.Any("error", err))
	}
	for _, w := range removed {
		p.log().DebugContext(ctx, "removed worktree", slog.String("worktree", w.Name()))
	}
}

// removeFinished removes the worktrees of the batch that just finished.
// The first call of a process scans for every leftover instead (a resumed
// run may find worktrees of tries a crash interrupted).
func (p *Pipeline) removeFinished(ctx context.Context, s State) {
	if p.Repo == nil {
		return
	}
	if !p.scanned.Swap(true) {
		p.cleanWorktrees(ctx, s)
		return
	}
	for _, id := range s.Batch.Get() {
		n := nextAttempt(s, id) - 1
		if n < 1 || p.goesOn(s, id, n) {
			continue
		}
		wt, err := p.Repo.Get(ctx, s.RunID.Get(), id, n)
		if err != nil {
			continue // gone already
		}
		if err := p.Repo.Remove(ctx, wt); err != nil {
			p.log().WarnContext(ctx, "remove worktree", slog.String("worktree", wt.Name()), slog.Any("error", err))
		}
	}
}

func (p *Pipeline) selectRouter(_ context.Context, s State) ([]graph.Send, error) {
	batch := s.Batch.Get()
	switch {
	case len(batch) == 0 && len(s.Escalations.Get()) > 0:
		// Nothing is left that does not wait on an escalated task.
		return []graph.Send{{Node: NodeEscalation}}, nil
	case len(batch) == 0:
		return []graph.Send{{Node: NodeBuild}}, nil
	case len(batch) == 1:
		return []graph.Send{{Node: NodeImplement}}, nil
	}
	sends := make([]graph.Send, len(batch))
	for i, id := range batch {
		sends[i] = graph.Send{Node: NodeImplementParallel, Input: id}
	}
	return sends, nil
}

// implement runs the worker on one task in a fresh worktree and commits
// what it changed.
func (p *Pipeline) implement(ctx context.Context, s State, id string) (State, error) {
	var u State
	task, ok := s.Tasks.Get(id)
	if !ok {
		return u, fmt.Errorf("implement: unknown task %q", id)
	}
	if task.Status == planner.StatusPending {
		// A retry routed straight back from verify_task.
		tasks, err := scheduler.Start(tasksOf(s), id)
		if err != nil {
			return u, err
		}
		task = *findTask(tasks, id)
		u.Tasks.Put(id, task)
	}
	// The attempt number never restarts (a review's retry goes on
	// counting), so each attempt gets its own worktree, trailer, kept ref
	// and conversation.
	job := AttemptJob{RunID: s.RunID.Get(), Task: task, Attempt: nextAttempt(s, id)}
	if a, ok := s.Attempts.Get(attemptKey(id, job.Attempt-1)); ok && a.Resumed && a.Tests == nil && a.Error == "" && a.Integrated == "" {
		job.Attempt, job.Note = a.Attempt, a.ReviewerNote
	}
	var res AttemptResult
	var err error
	if p.Dispatcher != nil {
		res, err = p.dispatch(ctx, job)
	} else {
		res, err = p.RunAttempt(ctx, job)
	}
	if err != nil {
		return u, err
	}
	u.Attempts.Put(attemptKey(id, job.Attempt), res.Attempt)
	u.Log.Add(p.entry(id, "%s attempt %d: %s", id, job.Attempt, res.Note))
	return u, nil
}

// AttemptJob is one attempt of a task, as a worker gets it.
type AttemptJob struct {
	RunID   string       `json:"run_id"`
	Task    planner.Task `json:"task"`
	Attempt int          `json:"attempt"`
	// Base is the commit the attempt starts from; "" is the target
	// branch's head.
	Base string `json:"base,omitempty"`
	// Note is a reviewer's note for an attempt that goes on after the
	// provider stopped it.
	Note string `json:"note,omitempty"`
}

// AttemptResult is what an attempt's worker did.
type AttemptResult struct {
	Attempt Attempt `json:"attempt"`
	// Note is the run log's line about it.
	Note string `json:"note"`
	// Worker is the process that ran it, as host:pid; "" is this one.
	Worker string `json:"worker,omitempty"`
	// Pushed says the attempt's commit is at its AttemptRef on the
	// shared remote rather than only in this repository.
	Pushed bool `json:"pushed,omitempty"`
}

// RunAttempt runs one attempt in its worktree in this repository: the
// worker, the guard around it, and the commit of what it changed.
func (p *Pipeline) RunAttempt(ctx context.Context, job AttemptJob) (AttemptResult, error) {
	id, attempt, run, task := job.Task.ID, job.Attempt, job.RunID, job.Task
	// A worktree of this very attempt means the process died while the
	// worker ran: the worker resumes its conversation there.
	wt, err := p.Repo.Get(ctx, run, id, attempt)
	resumed := err == nil
	if resumed && p.Repo.Check(wt) != nil {
		// Its .git is gone: the attempt starts over in a new worktree.
		resumed = false
	}
	if resumed {
		// The worker that died may have left git's locks, or its HEAD
		// detached mid-rebase: put back now, it is not this attempt's
		// doing.
		if fixed, err := p.Repo.Repair(wt); err != nil {
			return AttemptResult{}, fmt.Errorf("implement %s: %w", id, err)
		} else if len(fixed) > 0 {
			p.log().InfoContext(ctx, "repaired the worktree a stopped attempt left", slog.String("task_id", id),
				slog.Int("attempt", attempt), slog.Any("put back", fixed))
		}
	}
	if !resumed {
		if wt, err = p.createWorktree(ctx, run, id, attempt, job.Base); err != nil {
			return AttemptResult{}, fmt.Errorf("implement %s: %w", id, err)
		}
	}
	// What the worker may not touch (other refs, the repo's config and
	// hooks) is snapshotted now and put back after it.
	guard, err := p.Repo.Guard(ctx, wt)
	if err != nil {
		return AttemptResult{}, fmt.Errorf("implement %s: %w", id, err)
	}
	p.crash("implement:before_worker")
	rec := Attempt{TaskID: id, Attempt: attempt, Worktree: wt.Name(), Branch: wt.Branch}
	// The prompt's "Attempt: n of max" shows the task's progress toward
	// max_attempts (task.Attempts+1); the conversation is named by the
	// attempt number.
	ajob := agent.Job{RunID: run, Task: task, Attempt: attempt, MaxAttempts: task.MaxAttempts, Worktree: wt.Path,
		// A reviewer's notes are in the task's implementation notes,
		// which the prompt shows.
		PreviousError: task.Error, Restart: !resumed, ReviewerNote: job.Note}
	wctx, cancel := watch(ctx, id, attempt), context.CancelFunc(func() {})
	if p.WorkerTimeout > 0 {
		wctx, cancel = workerDeadline(wctx, p.WorkerTimeout)
	}
	out, werr := p.Worker.Implement(wctx, ajob)
	timedOut := errors.Is(context.Cause(wctx), errWorkerTimeout)
	cancel()
	switch {
	case werr != nil && ctx.Err() != nil:
		return AttemptResult{}, werr
	case timedOut:
		rec.Error = fmt.Sprintf("worker: timed out after %s (worker.timeout)", p.WorkerTimeout)
	case out.Status == agent.OutcomeProvider:
		// The provider, not the attempt, failed: verify_task pauses the
		// task for review without counting an attempt.
		rec.ProviderError = out.Detail
	case werr != nil:
		rec.Error = "worker: " + werr.Error()
	case out.ExitCode != nil && *out.ExitCode != 0:
		// An external agent CLI that fails fails the attempt; its
		// stderr says why.
		rec.Error = "worker: " + out.Detail
	}
	refused := errors.Is(werr, agent.ErrProviderRefused)
	// A store that stayed away past database.retry_for failed the
	// worker's bookkeeping, not its work: no attempt is spent on it. The
	// run stops to be resumed, or the queue tries the job again.
	storeDown := errors.Is(werr, checkpoint.ErrStoreUnreachable)
	if gerr := p.Repo.Restore(ctx, guard); gerr != nil {
		var te *worktree.TamperError
		switch {
		case errors.As(gerr, &te):
			rec.Error = joinErrors(rec.Error, "worker: "+gerr.Error())
		case errors.Is(gerr, worktree.ErrBroken), errors.Is(gerr, worktree.ErrNotFound):
			// Nothing of this attempt can be committed: git there would
			// not run against the attempt. The retry gets a new worktree.
			rec.Error = joinErrors(rec.Error, "the attempt's worktree was broken while the worker ran (by the worker or by hand): "+gerr.Error())
			return AttemptResult{Attempt: rec, Note: clip.Line(rec.Error, 160)}, nil
		default:
			return AttemptResult{}, fmt.Errorf("implement %s: %w", id, gerr)
		}
	}
	if refused || storeDown {
		// Every task would fail alike: the run stops, and this attempt's
		// conversation goes on when it resumes.
		return AttemptResult{}, fmt.Errorf("implement %s: %w", id, werr)
	}
	rec.Worker, rec.WorkerReason = out.Summary, string(out.Status)
	if out.Detail != "" {
		rec.WorkerReason += ": " + out.Detail
	}
	if out.Status == agent.OutcomeQuestion {
		rec.Question = out.Question
	}
	rec.ConversationID = out.ConversationID
	rec.InputTokens, rec.OutputTokens, rec.CostUSD = out.Usage.InputTokens, out.Usage.OutputTokens, out.Usage.CostUSD
	rec.CacheReadTokens, rec.CacheWriteTokens, rec.UsageEstimated = out.Usage.CacheReadTokens, out.Usage.CacheWriteTokens, out.Usage.Estimated
	rec.UsageUnreported = out.Usage.Unreported
	sha, changed, err := p.Repo.Commit(ctx, wt, fmt.Sprintf("%s: %s", id, task.Title))
	if err != nil {
		return AttemptResult{}, fmt.Errorf("implement %s: commit: %w", id, err)
	}
	if !changed && resumed {
		// Committed before the crash.
		from := wt.Base
		if from == "" {
			from = p.Repo.MainBranch()
		}
		ahead, _ := gitOutput(ctx, wt.Path, "rev-list", "--count", from+"..HEAD")
		changed = strings.TrimSpace(ahead) != "0" && strings.TrimSpace(ahead) != ""
		if changed {
			sha, _ = gitOutput(ctx, wt.Path, "rev-parse", "HEAD")
			sha = strings.TrimSpace(sha)
		}
	}
	discarded := false
	if changed {
		if names := p.committedSecrets(ctx, wt); len(names) > 0 {
			// A secret must never reach the user's branch. The commit is
			// dropped from the attempt's branch; the retry is told why.
			if _, err := gitOutput(ctx, wt.Path, "reset", "-q", "--hard", "HEAD~1"); err != nil {
				return AttemptResult{}, fmt.Errorf("implement %s: drop a commit with secrets: %w", id, err)
			}
			sha, changed, discarded = "", false, true
			// Taskloom's own finding comes first: after a worker's
			// stderr it would read as the end of that stderr.
			rec.Error = joinErrors(fmt.Sprintf("the attempt's changes contain the value of %s; a secret must never be committed, so they were discarded",
				strings.Join(names, ", ")), rec.Error)
		}
	}
	if changed {
		if why := p.testsWeakened(ctx, wt, task); len(why) > 0 {
			// The commit stays on the attempt's branch, never on main: the
			// retry is told why, and a reviewer can look.
			rec.Error = joinErrors(fmt.Sprintf("the attempt changed how the project's tests run, which is not this task's to change: %s (a task may change such a file only when it names it in its files)",
				strings.Join(why, "; ")), rec.Error)
		}
	}
	if changed && len(p.BuildCommand) == 0 {
		// The tests run in this worktree next. Whatever git ignores that
		// the worker left here, they see and main will not have. Without
		// a build command, a lone fast-forward whose worktree held nothing
		// else skips the check on main (integrateBatch); with one, main is
		// always checked, and the walk is not needed.
		ignored, err := p.Repo.Ignored(ctx, wt)
		rec.Clean = err == nil && len(ignored) == 0
		rec.Ignored = ignored[:min(len(ignored), 20)]
	}
	rec.Commit, rec.Changed = sha, changed
	p.crash("implement:after_commit")
	msg := "worker finished"
	if rec.WorkerReason != "" {
		msg += " (" + rec.WorkerReason + ")"
	}
	switch {
	case discarded:
		msg += "; its changes held a secret and were discarded"
	case !changed:
		msg += "; it changed nothing"
	}
	if len(rec.Ignored) > 0 {
		msg += "; it left files git ignores, which main will not have: " + clip.Line(strings.Join(rec.Ignored, ", "), 120)
	}
	return AttemptResult{Attempt: rec, Note: msg}, nil
}

var errWorkerTimeout = errors.New("worker timed out")

// workerDeadline ends ctx with errWorkerTimeout after d of the worker's
// own time. The time the provider costs it is not the worker's: a wait for
// a rate limit or an overload, and the failed request before it, push the
// deadline back by as much, so that provider trouble never uses up an
// attempt (it pauses the task once the retries are spent).
func workerDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	var mu sync.Mutex
	deadline := time.Now().Add(d)
	timer := time.AfterFunc(d, func() { cancel(errWorkerTimeout) })
	ctx = llm.WithWaitFunc(ctx, func(w llm.WaitInfo) {
		if w.Retry == 0 && !w.Shared {
			return // a limiter's wait, shown once it ended: told before too, as Shared
		}
		mu.Lock()
		defer mu.Unlock()
		deadline = deadline.Add(w.Wait + w.Lost)
		if timer.Stop() { // not fired yet: the worker still has time
			timer.Reset(time.Until(deadline))
		}
	})
	return ctx, func() {
		timer.Stop()
		cancel(nil)
	}
}

func joinErrors(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "\n" + b
}

// committedSecrets returns the names of the secrets whose values the
// attempt's commit contains.
func (p *Pipeline) committedSecrets(ctx context.Context, wt *worktree.Worktree) []string {
	if p.Secrets == nil {
		return nil
	}
	patch, err := p.Repo.CommitPatch(ctx, wt)
	if err != nil {
		return nil
	}
	return p.Secrets.Find([]byte(patch))
}

// createWorktree makes an attempt's worktree. A branch left without its
// worktree (the folder was deleted, by a worker or by hand) is removed
// first, its commit kept, so that the attempt starts afresh.
func (p *Pipeline) createWorktree(ctx context.Context, run, id string, attempt int, base string) (*worktree.Worktree, error) {
	wt, err := p.Repo.CreateAt(ctx, run, id, attempt, base)
	if !errors.Is(err, worktree.ErrExists) {
		return wt, err
	}
	p.log().WarnContext(ctx, "recreating a broken worktree", slog.String("task_id", id), slog.Int("attempt", attempt), slog.Any("error", err))
	if rerr := p.Repo.RemoveAttempt(ctx, run, id, attempt); rerr != nil {
		return nil, fmt.Errorf("%w (and removing what is left: %v)", err, rerr)
	}
	return p.Repo.CreateAt(ctx, run, id, attempt, base)
}

// EscalationPayload is what a human_escalation interrupt carries.
type EscalationPayload struct {
	TaskID   string `json:"task_id"`
	Title    string `json:"title"`
	Reason   string `json:"reason"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
	// Attempt is the key of the task's last attempt in State.Attempts.
	Attempt string `json:"attempt,omitempty"`
	// Ref names that attempt's work so that git show accepts it: the ref
	// that keeps its commit, refs/taskloom/attempts/RUN_ID/TASK_ID/ATTEMPT,
	// or, when it was integrated (and reverted since), its commit on the
	// target branch. It is empty when the attempt committed nothing.
	Ref string `json:"ref,omitempty"`
}

// escalate asks a human about each escalated task, then applies the
// decisions.
func (p *Pipeline) escalate(ctx context.Context, s State) (State, error) {
	var u State
	p.cleanWorktrees(ctx, s)
	escs := s.Escalations.Get()
	tasks := tasksOf(s)
	decisions := make([]Decision, len(escs))
	var errs []error
	for i, e := range escs {
		payload := EscalationPayload{TaskID: e.TaskID, Reason: e.Reason, Error: e.Error}
		if t := findTask(tasks, e.TaskID); t != nil {
			payload.Title, payload.Attempts = t.Title, t.Attempts
			if a, ok := LastAttempt(s, t.ID); ok {
				payload.Attempt = attemptKey(t.ID, a.Attempt)
				payload.Ref = p.keep(ctx, s.RunID.Get(), a)
			}
		}
		d, err := graph.Interrupt[Decision](ctx, payload)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		decisions[i] = d
	}
	if len(errs) > 0 {
		return u, errors.Join(errs...)
	}
	for i, e := range escs {
		d := decisions[i]
		var err error
		switch d.Action {
		case ActionAbort:
			u.Outcome.Set(OutcomeAborted)
			u.OutcomeReason.Set(strings.TrimSuffix("aborted in the review of "+e.TaskID+": "+d.Note, ": "))
			u.Log.Add(p.entry(e.TaskID, "review: abort the run"))
			u.Escalations.Set(nil)
			putChanged(&u, s, tasks)
			return u, nil
		default:
			tasks, err = ApplyDecision(tasks, e.TaskID, d)
			if a, ok := p.providerStopped(s, e.TaskID); ok && d.Action == ActionRetry && d.Note != "" {
				// The attempt goes on in its conversation, whose
				// prompt the note's place in the task no longer reaches.
				a.ReviewerNote = d.Note
				u.Attempts.Put(attemptKey(e.TaskID, a.Attempt), a)
			}
		}
		if err != nil {
			return u, err
		}
		note := ""
		if d.Note != "" {
			note = ": " + d.Note
		}
		u.Log.Add(p.entry(e.TaskID, "review: %s %s%s", d.Action, e.TaskID, note))
	}
	putChanged(&u, s, tasks)
	u.Escalations.Set(nil)
	u.Batch.Set(nil)
	return u, nil
}

// keep returns a ref of an escalated attempt's work that git show accepts
// (see EscalationPayload.Ref), making sure that it exists: the reviewer
// is shown it.
func (p *Pipeline) keep(ctx context.Context, run string, a Attempt) string {
	switch {
	case a.Integrated != "":
		return a.Integrated
	case a.Commit == "" || !a.Changed || p.Repo == nil:
		return ""
	}
	ref, err := p.Repo.Keep(ctx, run, a.TaskID, a.Attempt, a.Commit)
	if err != nil {
		p.log().WarnContext(ctx, "keep an escalated attempt", slog.String("task_id", a.TaskID), slog.Int("attempt", a.Attempt), slog.Any("error", err))
		return ""
	}
	return ref
}

func (p *Pipeline) escalationRouter(_ context.Context, s State) (string, error) {
	if s.Outcome.Get() == OutcomeAborted {
		return graph.END, nil
	}
	return NodeSelect, nil
}

func short(sha string) string {
	if len(sha) > 10 {
		return sha[:10]
	}
	return sha
}

func itoa(n int) string { return strconv.Itoa(n) }

// providerStopped returns the task's last attempt when the model provider
// stopped it (its retries ran out) and it can go on where it stopped: in
// this repository, where its worktree stays, not on a worker elsewhere,
// which keeps none.
func (p *Pipeline) providerStopped(s State, taskID string) (Attempt, bool) {
	if p.Dispatcher != nil {
		return Attempt{}, false
	}
	a, ok := s.Attempts.Get(attemptKey(taskID, nextAttempt(s, taskID)-1))
	return a, ok && a.ProviderError != "" && a.Error == "" && a.Integrated == ""
}

// goesOn reports whether attempt n of a task is one the provider stopped
// that waits to go on (its task not yet done), whose worktree stays.
func (p *Pipeline) goesOn(s State, taskID string, n int) bool {
	a, ok := p.providerStopped(s, taskID)
	if !ok || a.Attempt != n {
		return false
	}
	t, ok := s.Tasks.Get(taskID)
	return ok && (t.Status == planner.StatusPending || t.Status == planner.StatusInProgress)
}

// nextAttempt returns the number of a task's next attempt: one more than
// the highest recorded.
func nextAttempt(s State, taskID string) int {
	n := 0
	prefix := taskID + "/"
	for _, k := range s.Attempts.Keys() {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			if v, err := strconv.Atoi(rest); err == nil && v > n {
				n = v
			}
		}
	}
	return n + 1
}

// plural is "1 task", "2 tasks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
