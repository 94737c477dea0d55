package nodes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/worktree"
)

// Dispatcher hands attempts to a durable job queue that workers take them
// from: in this process or in `taskloom worker` processes on other
// machines.
type Dispatcher interface {
	// Dispatch queues the attempt, unless it is queued already (a resumed
	// run asks again for the attempts it was waiting on), and waits for
	// its result. It tells progress what the attempt's worker is doing.
	Dispatch(ctx context.Context, job AttemptJob, progress func(Activity)) (AttemptResult, error)
}

// dispatch runs an attempt through the Dispatcher and makes its worktree
// here, holding the worker's commit, for verify_task and integrate.
func (p *Pipeline) dispatch(ctx context.Context, job AttemptJob) (AttemptResult, error) {
	id := job.Task.ID
	head, err := p.Repo.Head(ctx)
	if err != nil {
		return AttemptResult{}, fmt.Errorf("implement %s: %w", id, err)
	}
	job.Base = head
	if p.Remote != "" {
		// Workers elsewhere fetch the base from the shared remote.
		if err := p.Repo.Push(ctx, p.Remote, head, worktree.BaseRef(job.RunID, id, job.Attempt)); err != nil {
			return AttemptResult{}, fmt.Errorf("implement %s: %w", id, err)
		}
	}
	p.crash("implement:before_worker")
	res, err := p.Dispatcher.Dispatch(ctx, job, func(a Activity) {
		a.TaskID, a.Attempt = id, job.Attempt
		report(ctx, a)
	})
	if err != nil {
		if ctx.Err() != nil {
			return AttemptResult{}, err
		}
		// The queue gave up on the attempt (its worker kept failing): the
		// attempt failed, as if its worker had.
		rec := Attempt{TaskID: id, Attempt: job.Attempt, Error: "worker: " + err.Error()}
		return AttemptResult{Attempt: rec, Note: clip.Line(rec.Error, 160)}, nil
	}
	if err := p.adopt(ctx, job, &res); err != nil {
		var lost *lostResultError
		if errors.As(err, &lost) {
			// What the worker spent, it spent: its usage stays.
			rec := res.Attempt
			rec.TaskID, rec.Attempt, rec.Error = id, job.Attempt, "worker: "+lost.Error()
			rec.Changed, rec.Commit, rec.Worktree, rec.Branch = false, "", "", ""
			return AttemptResult{Attempt: rec, Note: clip.Line(rec.Error, 160)}, nil
		}
		return AttemptResult{}, fmt.Errorf("implement %s: %w", id, err)
	}
	if res.Worker != "" {
		res.Note += " on " + res.Worker
	}
	return res, nil
}

// lostResultError is an attempt whose worker reported a commit that the
// run's remote does not have.
type lostResultError struct {
	worker, remote string
	err            error
}

func (e *lostResultError) Error() string {
	return fmt.Sprintf("the worker %s pushed the attempt's commit, but not to the run's remote %q (%v): check that its worker.remote names the run's repository",
		cmp.Or(e.worker, "elsewhere"), e.remote, clip.Line(e.err.Error(), 200))
}

// adopt makes sure the attempt's worktree here holds the worker's commit.
// A worker in this process left it in place; one elsewhere pushed it to
// the shared remote.
func (p *Pipeline) adopt(ctx context.Context, job AttemptJob, res *AttemptResult) error {
	rec := &res.Attempt
	id := job.Task.ID
	if wt, err := p.Repo.Get(ctx, job.RunID, id, job.Attempt); err == nil && p.Repo.Check(wt) == nil {
		if !res.Pushed || !rec.Changed {
			rec.Worktree, rec.Branch = wt.Name(), wt.Branch
			return nil
		}
		// A worktree left by a driver that died here while a worker
		// elsewhere ran the attempt: it starts again from the push.
		if err := p.Repo.Remove(ctx, wt); err != nil {
			return err
		}
	}
	commit := ""
	if rec.Changed {
		if !res.Pushed {
			return errors.New("the worker's commit is neither here nor on the remote")
		}
		ref := worktree.AttemptRef(job.RunID, id, job.Attempt)
		sha, err := p.Repo.Fetch(ctx, p.Remote, ref, job.RunID)
		if err != nil {
			if ok, lerr := p.Repo.RemoteHas(ctx, p.Remote, ref); lerr == nil && !ok {
				// The remote answers but has no such commit: the worker
				// pushed it somewhere else, and no resume would find
				// it. The attempt failed, as its worker's would.
				return &lostResultError{worker: res.Worker, remote: p.Remote, err: err}
			}
			return err
		}
		commit = sha
	}
	wt, err := p.createWorktree(ctx, job.RunID, id, job.Attempt, "")
	if err != nil {
		return err
	}
	if commit != "" {
		if err := p.Repo.Adopt(ctx, wt, commit); err != nil {
			return err
		}
		rec.Commit = commit
	}
	rec.Worktree, rec.Branch = wt.Name(), wt.Branch
	p.log().DebugContext(ctx, "attempt adopted", slog.String("task_id", id), slog.Int("attempt", job.Attempt), slog.String("worker", res.Worker))
	return nil
}

// ErrWorkerSetup is wrapped by what Work fails with when the clone it
// runs in cannot serve an attempt, whatever the attempt: its remote does
// not answer or is not the run's, or takes no push. Another worker can.
var ErrWorkerSetup = errors.New("this worker's clone cannot serve the attempt")

// Work runs a queued attempt in this repository. With a Remote (a worker on
// another machine) it fetches the attempt's base from there first, pushes
// the attempt's commit back to its AttemptRef, and removes the worktree; a
// worker sharing the run's repository leaves the worktree for the run.
func (p *Pipeline) Work(ctx context.Context, job AttemptJob) (AttemptResult, error) {
	setup := func(err error) error { return fmt.Errorf("%w: %w", ErrWorkerSetup, err) }
	if p.Remote == "" {
		if job.Base != "" && !p.Repo.HasCommit(ctx, job.Base) {
			return AttemptResult{}, setup(fmt.Errorf("attempt %s/%s/%d: its base %s is not in this repository", job.RunID, job.Task.ID, job.Attempt, short(job.Base)))
		}
		return p.RunAttempt(ctx, job)
	}
	id := job.Task.ID
	if job.Base != "" && !p.Repo.HasCommit(ctx, job.Base) {
		sha, err := p.Repo.Fetch(ctx, p.Remote, worktree.BaseRef(job.RunID, id, job.Attempt), job.RunID)
		if err != nil {
			return AttemptResult{}, setup(err)
		}
		if sha != job.Base {
			return AttemptResult{}, setup(fmt.Errorf("attempt %s/%s/%d: the remote's base is %s, the run's %s", job.RunID, id, job.Attempt, short(sha), short(job.Base)))
		}
	} else if job.Base != "" {
		// The base is here already, so nothing was fetched: the remote
		// must still be the run's, or the run would never find the
		// attempt's commit where this worker pushes it (a fork shares
		// the history, not the refs). Asked before the work, not after.
		ok, err := p.Repo.RemoteHas(ctx, p.Remote, worktree.BaseRef(job.RunID, id, job.Attempt))
		if err != nil {
			return AttemptResult{}, setup(err)
		}
		if !ok {
			return AttemptResult{}, setup(fmt.Errorf("attempt %s/%s/%d: the run's base ref is not on this clone's remote %q, so it is not the repository the run shares its attempts through: set worker.remote, or clone the run's repository", job.RunID, id, job.Attempt, p.Remote))
		}
	}
	res, err := p.RunAttempt(ctx, job)
	if err != nil {
		return res, err
	}
	if res.Attempt.Changed {
		if err := p.Repo.Push(ctx, p.Remote, res.Attempt.Commit, worktree.AttemptRef(job.RunID, id, job.Attempt)); err != nil {
			return AttemptResult{}, setup(err)
		}
		res.Pushed = true
	}
	if wt, err := p.Repo.Get(ctx, job.RunID, id, job.Attempt); err == nil {
		if err := p.Repo.Remove(ctx, wt); err != nil {
			p.log().WarnContext(ctx, "removing a finished attempt's worktree failed", slog.String("attempt", wt.ID()), slog.Any("error", err))
		}
	}
	// The commit is the run's now, on the remote: a ref keeping it here
	// would outlive the run, which deletes only its own.
	if err := p.Repo.DropAttempt(ctx, job.RunID, id, job.Attempt); err != nil {
		p.log().WarnContext(ctx, "dropping a pushed attempt's ref failed", slog.String("task_id", id), slog.Int("attempt", job.Attempt), slog.Any("error", err))
	}
	return res, nil
}
