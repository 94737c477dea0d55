package nodes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
	"github.com/taskloom/taskloom/verify"
	"github.com/taskloom/taskloom/worktree"
)

// verify asks verify/ for the verdict of each of the batch's attempts, in
// its worktree, and decides: a passing attempt with a commit waits for
// integrate, a passing one without changes completes its task, and a
// failing one fails its task (retried, or escalated). An attempt whose
// tests cannot run at all fails like any other: one task's broken
// verification never ends the run.
func (p *Pipeline) verify(ctx context.Context, s State) (State, error) {
	var u State
	batch := s.Batch.Get()
	tasks := tasksOf(s)
	recs := make([]Attempt, len(batch))
	wts := make([]*worktree.Worktree, len(batch))
	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	for i, id := range batch {
		t := findTask(tasks, id)
		if t == nil {
			return u, fmt.Errorf("verify: unknown task %q", id)
		}
		rec, ok := s.Attempts.Get(attemptKey(id, nextAttempt(s, id)-1))
		if !ok {
			return u, fmt.Errorf("verify %s: no attempt recorded", id)
		}
		recs[i] = rec
		spec := verify.Spec{Command: p.VerifyCommand, TestFiles: t.TestFiles, FilesToCreate: t.FilesToCreate}
		wg.Go(func() {
			wts[i], errs[i] = p.Repo.Get(ctx, s.RunID.Get(), id, rec.Attempt)
			if errs[i] != nil || rec.Question != "" || rec.ProviderError != "" || rec.Error != "" {
				return
			}
			report(ctx, Activity{TaskID: id, Attempt: rec.Attempt, Tool: ActivityTests, Summary: "running tests"})
			v, err := verify.Run(ctx, wts[i].Path, spec, p.VerifyOpts)
			if err != nil {
				errs[i] = err
				return
			}
			recs[i].Tests = &v
			recs[i].Verified = v.Passed
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return u, err
	}
	p.crash("verify:after_tests")
	// The escalations of earlier batches still wait for their review:
	// this batch's are added to them.
	escs := slices.Clone(s.Escalations.Get())
	nEscs := len(escs)
	for i, id := range batch {
		rec := &recs[i]
		var failure string
		// An attempt that failed before its tests (its dispatch, say, so
		// that it has no worktree here) fails with its own error.
		switch {
		case errs[i] != nil && rec.Error == "" && errors.Is(errs[i], worktree.ErrNotFound):
			failure = "the attempt's worktree is gone: " + errs[i].Error()
		case errs[i] != nil && rec.Error == "":
			failure = "cannot run the tests: " + errs[i].Error()
		case rec.Question != "":
			// A question costs no attempt: the task waits, pending, for
			// the reviewer's answer (a retry note) or decision.
			if t := findTask(tasks, id); t != nil {
				t.Status, t.Error = planner.StatusPending, "the worker asks: "+rec.Question
			}
			p.keepDiff(ctx, rec, wts[i])
			escs = append(escs, Escalation{TaskID: id, Reason: ReasonQuestion, Error: rec.Question})
			u.Log.Add(p.entry(id, "%s: the worker asks: %s", id, rec.Question))
		case rec.ProviderError != "":
			// Neither does a provider that kept failing: the task waits,
			// pending, until a person resumes or retries it.
			if t := findTask(tasks, id); t != nil {
				t.Status, t.Error = planner.StatusPending, "the model provider failed: "+rec.ProviderError
			}
			p.keepDiff(ctx, rec, wts[i])
			escs = append(escs, Escalation{TaskID: id, Reason: ReasonProvider, Error: rec.ProviderError})
			u.Log.Add(p.entry(id, "%s: paused, the model provider failed: %s", id, clip.Line(rec.ProviderError, 160)))
		case rec.Error != "":
			failure = rec.Error
		case !rec.Verified:
			failure = rec.Tests.ErrorContext(4000)
			if why := rec.WorkerReason; why != "" && !strings.HasPrefix(why, string(agent.OutcomeDone)) {
				// Why the worker stopped (stagnating, blocked, out of
				// turns) comes before what it left undone.
				failure = "the worker stopped: " + why + "\n" + failure
			}
		case !rec.Changed:
			// The worker changed nothing and the tests pass: the work was
			// already on main.
			var err error
			if tasks, err = scheduler.Pass(tasks, id); err != nil {
				return u, err
			}
			rec.NoChange = true
			u.Log.Add(p.entry(id, "%s passed its tests without changes (no_change: true); nothing to integrate", id))
		default:
			u.Log.Add(p.entry(id, "%s passed its tests (%s)", id, testCounts(rec.Tests)))
		}
		if failure != "" {
			var err error
			if tasks, escs, err = p.failAttempt(ctx, &u, tasks, escs, rec, wts[i], failure, ""); err != nil {
				return u, err
			}
		}
		u.Attempts.Put(attemptKey(id, rec.Attempt), *rec)
	}
	putChanged(&u, s, tasks)
	if len(escs) > nEscs {
		u.Escalations.Set(escs)
	}
	return u, nil
}

// testCounts says in a few words what a verdict counted.
func testCounts(v *verify.Verdict) string {
	if v == nil || v.Format == verify.FormatNone {
		return "no tests to run"
	}
	if v.Total == 0 {
		if v.Format == verify.FormatExitCode {
			return "exit code 0"
		}
		return v.Runner() + ", exit code 0"
	}
	noun := "tests"
	if v.Total == 1 {
		noun = "test"
	}
	return fmt.Sprintf("%s: %d %s, %d skipped", v.Runner(), v.Total, noun, v.Skipped)
}

// keepDiff records the diff of an attempt that changed something, for the
// reviewer of a try that failed, asked a question or was stopped by the
// provider.
func (p *Pipeline) keepDiff(ctx context.Context, rec *Attempt, wt *worktree.Worktree) {
	if rec.Changed && wt != nil && rec.Diff == "" {
		rec.Diff = p.diff(ctx, wt)
	}
}

// failAttempt records a failed attempt: its error, its diff for the
// reviewer, and its task's failure, retried or escalated (with reason, or
// max_attempts when reason is "").
func (p *Pipeline) failAttempt(ctx context.Context, u *State, tasks []planner.Task, escs []Escalation, rec *Attempt,
	wt *worktree.Worktree, failure, reason string) ([]planner.Task, []Escalation, error) {
	rec.Error = failure
	p.keepDiff(ctx, rec, wt)
	tasks, escalate, err := scheduler.Fail(tasks, rec.TaskID, failure)
	if err != nil {
		return tasks, escs, err
	}
	t := findTask(tasks, rec.TaskID)
	if escalate {
		if reason == "" {
			reason = ReasonMaxAttempts
		}
		escs = append(escs, Escalation{TaskID: rec.TaskID, Reason: reason, Error: failure})
		u.Log.Add(p.entry(rec.TaskID, "%s failed %s; escalating to a human: %s", rec.TaskID, AttemptLabel(rec.Attempt, t.Attempts, t.MaxAttempts), clip.Line(failure, 160)))
	} else {
		u.Log.Add(p.entry(rec.TaskID, "%s failed %s; retrying: %s", rec.TaskID, AttemptLabel(rec.Attempt, t.Attempts, t.MaxAttempts), clip.Line(failure, 160)))
	}
	return tasks, escs, nil
}

// freeConflicts is how many of a task's tries may conflict with main, each
// redone without counting against max_attempts, before a conflict counts.
const freeConflicts = 2

// conflictsOf counts the task's tries that conflicted with main.
func conflictsOf(s State, id string) int {
	n := 0
	for _, a := range s.Attempts.Values() {
		if a.TaskID == id && len(a.Conflicts) > 0 {
			n++
		}
	}
	return n
}

// integrateBatch integrates the batch's passing attempts into the target
// branch through worktree/, each exactly once (by its trailer), in batch
// order. A conflict fails the attempt with the conflicting files. The
// attempts integrated wait in the queue for build_verification, unless
// the only one was a fast-forward whose worktree held nothing else: the
// branch's tree is then the very tree its tests passed on. Files git
// ignores that the worker left there may be what made them pass.
func (p *Pipeline) integrateBatch(ctx context.Context, s State) (State, error) {
	var u State
	tasks := tasksOf(s)
	escs := s.Escalations.Get()
	nEscs := len(escs)
	head := s.Head.Get()
	queue := s.Queue.Get()
	var integrated []string
	fastForward := false
	// cleanFF says that main's head is the last attempt integrated, by a
	// fast-forward, and that its tests ran on exactly that tree.
	cleanFF := false
	for _, id := range s.Batch.Get() {
		key := attemptKey(id, nextAttempt(s, id)-1)
		rec, ok := s.Attempts.Get(key)
		t := findTask(tasks, id)
		if !ok || t == nil || t.Status != planner.StatusInProgress || !rec.Verified || !rec.Changed || rec.Error != "" || rec.Integrated != "" {
			continue
		}
		wt, err := p.Repo.Get(ctx, s.RunID.Get(), id, rec.Attempt)
		var sha string
		var conflicts []string
		if err == nil {
			var ff bool
			sha, conflicts, ff, err = p.integrate(ctx, wt, head)
			fastForward = ff
		}
		var failure, reason string
		switch {
		case errors.Is(err, worktree.ErrNotFound):
			failure = "the attempt's worktree is gone: " + err.Error()
		case err != nil:
			return u, fmt.Errorf("integrate %s: %w", id, err)
		case len(conflicts) > 0:
			rec.Conflicts = conflicts
			failure = "merge conflict with main in " + strings.Join(conflicts, ", ") + "; main moved on: redo the task on the new main"
			reason = ReasonConflict
			if conflictsOf(s, id) < freeConflicts {
				// Another task's change met it: not its failure. It is
				// redone on the new main, uncounted, a bounded number
				// of times, in case its own try keeps causing it.
				rec.Error = failure
				if tasks, err = scheduler.Requeue(tasks, id, failure); err != nil {
					return u, err
				}
				u.Attempts.Put(key, rec)
				u.Log.Add(p.entry(id, "%s attempt %d conflicts with main in %s; redone on the new main (not counted against max_attempts)",
					id, rec.Attempt, strings.Join(conflicts, ", ")))
				continue
			}
		}
		if failure != "" {
			if tasks, escs, err = p.failAttempt(ctx, &u, tasks, escs, &rec, wt, failure, reason); err != nil {
				return u, err
			}
			u.Attempts.Put(key, rec)
			continue
		}
		rec.Integrated, head = sha, sha
		cleanFF = fastForward && rec.Clean
		if tasks, err = scheduler.Pass(tasks, id); err != nil {
			return u, err
		}
		u.Integrated.Add(key)
		integrated = append(integrated, key)
		u.Attempts.Put(key, rec)
		u.Log.Add(p.entry(id, "%s passed its tests and was integrated as %s", id, short(sha)))
	}
	putChanged(&u, s, tasks)
	if len(escs) > nEscs {
		u.Escalations.Set(escs)
	}
	if head != s.Head.Get() {
		u.Head.Set(head)
	}
	switch {
	case len(integrated) == 1 && len(queue) == 0 && cleanFF && len(p.BuildCommand) == 0:
		u.Verified.Set(head)
	case len(integrated) > 0:
		u.Queue.Set(append(append([]string(nil), queue...), integrated...))
	}
	return u, nil
}

// integrate applies an attempt to main exactly once. It returns the
// commit on main, or the conflicting files, and whether main
// fast-forwarded to the attempt's own commit. It refuses with a
// *worktree.ResetError when main no longer contains head, the last head
// the run recorded: the user reset or rewrote it, and integrating on top
// would bury that silently.
func (p *Pipeline) integrate(ctx context.Context, wt *worktree.Worktree, head string) (string, []string, bool, error) {
	p.crash("integrate:before")
	if err := p.Repo.CheckHead(ctx, wt.Run, head); err != nil {
		return "", nil, false, err
	}
	res, err := p.Repo.Integrate(ctx, wt)
	var cerr *worktree.ConflictError
	if errors.As(err, &cerr) {
		return "", cerr.Files, false, nil
	}
	if err != nil {
		return "", nil, false, err
	}
	p.crash("integrate:after")
	return res.Commit, nil, res.FastForward, nil
}

func (p *Pipeline) diff(ctx context.Context, wt *worktree.Worktree) string {
	out, err := gitOutput(ctx, wt.Path, "diff", "--stat", "--patch", "HEAD~1", "HEAD")
	if err != nil {
		return ""
	}
	return verify.Trim(out, 8000)
}

func (p *Pipeline) integrateRouter(_ context.Context, s State) (string, error) {
	if len(s.Queue.Get()) > 0 {
		return NodeBuild, nil // the merge queue: the batch is checked on main first
	}
	tasks := tasksOf(s)
	if batch := s.Batch.Get(); len(batch) == 1 && p.Workers <= 1 {
		// A task left pending by a question or a provider that kept
		// failing waits for its review instead.
		if t := findTask(tasks, batch[0]); t != nil && t.Status == planner.StatusPending && t.Attempts > 0 && !escalated(s, t.ID) {
			return NodeImplement, nil // retry with the error
		}
	}
	if len(s.Escalations.Get()) == 0 && finished(tasks) {
		return NodeBuild, nil
	}
	// With an escalation pending, the tasks that do not wait on it run
	// first: select_task pauses the run for review once none is left.
	return NodeSelect, nil
}
