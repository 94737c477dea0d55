package nodes

import (
	"context"
	"fmt"
	"strings"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
	"github.com/taskloom/taskloom/worktree"
)

// buildVerification runs the build and the tests on main once every task
// is done. When main is broken, it looks for the culprit: walking the
// integrated attempts from the newest, it builds the commit before each;
// the first attempt whose parent passes broke main. That attempt is
// reverted on main (a revert commit, integrated like any attempt) and its
// task fails with the build's error, so it is retried or escalated.
func (p *Pipeline) buildVerification(ctx context.Context, s State) (State, error) {
	var u State
	if s.Outcome.Get() == OutcomeAborted {
		return u, nil
	}
	p.cleanWorktrees(ctx)
	n := s.Builds.Get() + 1
	u.Builds.Set(n)
	run := s.RunID.Get()
	buildID := "build"
	wt, err := p.Repo.Create(ctx, run, buildID, n)
	if err != nil {
		return u, fmt.Errorf("build verification: %w", err)
	}
	defer func() { _ = p.Repo.Remove(context.WithoutCancel(ctx), wt) }()
	p.crash("build:before")
	failure, err := p.checkBuild(ctx, wt.Path)
	if err != nil {
		return u, err
	}
	if failure == "" {
		u.Outcome.Set(OutcomeCompleted)
		u.Log.Add(p.entry("", "build verification passed on main"))
		return u, nil
	}
	u.Log.Add(p.entry("", "build verification failed on main: %s", firstLine(failure)))
	culprit, err := p.findCulprit(ctx, s, wt)
	if err != nil {
		return u, err
	}
	if culprit == "" {
		u.Outcome.Set(OutcomeFailed)
		u.Log.Add(p.entry("", "main is broken and no integrated task explains it: %s", firstLine(failure)))
		return u, nil
	}
	rec, _ := s.Attempts.Get(culprit)
	// Revert the culprit on main, from a fresh worktree at main's head.
	if _, err := gitOutput(ctx, wt.Path, "checkout", "-q", "-B", wt.Branch, p.Repo.MainBranch()); err != nil {
		return u, fmt.Errorf("build verification: %w", err)
	}
	if _, err := gitOutput(ctx, wt.Path, "revert", "--no-commit", rec.Integrated); err != nil {
		return u, fmt.Errorf("build verification: revert %s: %w", culprit, err)
	}
	if _, _, err := p.Repo.Commit(ctx, wt, fmt.Sprintf("Revert %s: it broke the build on main", rec.TaskID)); err != nil {
		return u, fmt.Errorf("build verification: commit revert of %s: %w", culprit, err)
	}
	sha, conflicts, err := p.integrate(ctx, wt, s.Head.Get())
	if err != nil {
		return u, fmt.Errorf("build verification: integrate the revert of %s: %w", culprit, err)
	}
	if len(conflicts) > 0 {
		return u, fmt.Errorf("build verification: integrate the revert of %s: conflicts in %s", culprit, strings.Join(conflicts, ", "))
	}
	u.Head.Set(sha)
	u.Log.Add(p.entry(rec.TaskID, "%s broke main; reverted it as %s", rec.TaskID, short(sha)))
	tasks := tasksOf(s)
	t := findTask(tasks, rec.TaskID)
	t.Status = planner.StatusInProgress
	msg := "build verification on main failed after this task was integrated (it was reverted):\n" + failure
	tasks, escalate, err := scheduler.Fail(tasks, rec.TaskID, msg)
	if err != nil {
		return u, err
	}
	putChanged(&u, s, tasks)
	if escalate {
		u.Escalations.Set([]Escalation{{TaskID: rec.TaskID, Reason: ReasonBuild, Error: msg}})
	}
	return u, nil
}

// checkBuild runs the build command and the verify command in dir and
// returns the failure, or "".
func (p *Pipeline) checkBuild(ctx context.Context, dir string) (string, error) {
	if len(p.BuildCommand) > 0 {
		cf, err := p.Verify.confine(dir)
		if err != nil {
			return "", err
		}
		res, err := RunCommand(ctx, dir, p.BuildCommand, p.Verify.Timeout, cf)
		if err != nil {
			return "", err
		}
		if res.ExitCode != 0 || res.TimedOut {
			return fmt.Sprintf("%s exited %d:\n%s", strings.Join(p.BuildCommand, " "), res.ExitCode, res.Output), nil
		}
	}
	report, err := Verify(ctx, dir, nil, nil, p.Verify)
	if err != nil {
		return "", err
	}
	if !report.Passed {
		return report.ErrorContext(4000), nil
	}
	return "", nil
}

// findCulprit returns the attempt key of the integrated attempt that broke
// main, or "".
func (p *Pipeline) findCulprit(ctx context.Context, s State, wt *worktree.Worktree) (string, error) {
	integrated := s.Integrated.Items()
	for i := len(integrated) - 1; i >= 0; i-- {
		rec, ok := s.Attempts.Get(integrated[i])
		if !ok || rec.Integrated == "" {
			continue
		}
		if _, err := gitOutput(ctx, wt.Path, "checkout", "-q", "--detach", rec.Integrated+"^"); err != nil {
			return "", fmt.Errorf("build verification: %w", err)
		}
		failure, err := p.checkBuild(ctx, wt.Path)
		if err != nil {
			return "", err
		}
		if failure == "" {
			return integrated[i], nil
		}
	}
	return "", nil
}

func (p *Pipeline) buildRouter(_ context.Context, s State) (string, error) {
	switch {
	case s.Outcome.Get() != "":
		return graph.END, nil
	case len(s.Escalations.Get()) > 0:
		return NodeEscalation, nil
	}
	return NodeSelect, nil
}
