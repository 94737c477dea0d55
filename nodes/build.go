package nodes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
	"github.com/taskloom/taskloom/verify"
	"github.com/taskloom/taskloom/worktree"
)

// buildVerification runs the build and the tests once on the target
// branch's head: after each batch that integrated something (the merge
// queue), and when every task is done. A head that passed before is not
// built again. When the head fails, it bisects over the queue's attempts
// (every attempt integrated, at the end of an older run) to find the one
// whose integration broke the branch, in about log2(n) builds, and leaves
// it in Culprits for revert_culprits. Each build is a line of the run's
// log.
func (p *Pipeline) buildVerification(ctx context.Context, s State) (State, error) {
	var u State
	if s.Outcome.Get() == OutcomeAborted {
		return u, nil
	}
	p.cleanWorktrees(ctx, s)
	final := finished(tasksOf(s)) && len(s.Escalations.Get()) == 0
	head, own, err := p.verifiedHead(ctx, s)
	if err != nil {
		return u, fmt.Errorf("build verification: %w", err)
	}
	if head != s.Head.Get() {
		u.Head.Set(head)
	}
	if len(s.Queue.Get()) > 0 {
		u.Queue.Set(nil)
	}
	if head != "" && head == s.Verified.Get() {
		if final {
			u.Outcome.Set(OutcomeCompleted)
			u.Log.Add(p.entry("", "build verification passed on main (its head %s passed before)", short(head)))
		}
		return u, nil
	}
	if len(p.BuildCommand) == 0 && len(p.VerifyCommand) == 0 {
		// Nothing to run: there is nothing to bisect either.
		u.Verified.Set(head)
		if final {
			u.Outcome.Set(OutcomeCompleted)
			u.Log.Add(p.entry("", "build verification passed on main (no build or verify command)"))
		}
		return u, nil
	}
	n := s.Builds.Get() + 1
	u.Builds.Set(n)
	wt, err := p.createWorktree(ctx, s.RunID.Get(), "build", n, "")
	if err != nil {
		return u, fmt.Errorf("build verification: %w", err)
	}
	defer func() { _ = p.Repo.Remove(context.WithoutCancel(ctx), wt) }()
	p.crash("build:before")
	failure, byBuild, err := p.check(ctx, wt.Path, false)
	if err != nil {
		return u, err
	}
	if failure == "" {
		u.Verified.Set(head)
		u.Log.Add(p.entry("", "build verification passed on main at %s", short(head)))
		if final {
			u.Outcome.Set(OutcomeCompleted)
		}
		return u, nil
	}
	u.Log.Add(p.entry("", "build verification failed on main at %s: %s", short(head), clip.Line(failure, 160)))
	if own != "" {
		passed, err := p.ownHeadPasses(ctx, s, wt.Path, own)
		if err != nil {
			return u, err
		}
		if passed {
			// The run's tasks did not break it: nothing of theirs is
			// reverted, and a finished run fails, as main does.
			line := fmt.Sprintf("main fails its build verification at %s, while the run's own head %s passes: commits made on main outside the run broke it, and are yours to fix", short(head), short(own))
			u.Log.Add(p.entry("", "%s", line))
			if final {
				u.Outcome.Set(OutcomeFailed)
				u.OutcomeReason.Set(line + ": " + clip.Line(failure, 160))
			}
			return u, nil
		}
	}
	keys := s.Queue.Get()
	if len(keys) == 0 {
		keys = s.Integrated.Items()
	}
	b := &bisection{p: p, s: s, u: &u, wt: wt, head: head, buildOnly: byBuild}
	c, err := b.run(ctx, keys, failure)
	if err != nil {
		return u, fmt.Errorf("build verification: %w", err)
	}
	switch {
	case c != nil:
		u.Culprits.Set([]Culprit{*c})
	case b.flaky:
		// The failure did not come back: nothing is reverted, and the
		// log keeps it for the user, who may have a flaky test.
		u.Verified.Set(head)
		u.Log.Add(p.entry("", "build verification passed on main at %s when run again, after it failed once (a flaky test?); nothing is reverted. The failure was: %s",
			short(head), clip.Line(failure, 160)))
		if final {
			u.Outcome.Set(OutcomeCompleted)
		}
	case final:
		line := "main fails its build verification and no integrated task explains it: " + clip.Line(failure, 160)
		u.Outcome.Set(OutcomeFailed)
		u.OutcomeReason.Set(line)
		u.Log.Add(p.entry("", "%s", line))
	default:
		// The branch failed before these attempts too: they stay, and
		// the run goes on; the final build verification says so again.
		// Why it failed there is said, since a build that timed out
		// there may be slow rather than broken.
		why := ""
		if b.baseFailure != "" {
			why = ": " + clip.Line(b.baseFailure, 160)
		}
		u.Log.Add(p.entry("", "main failed before these attempts too%s; they stay integrated", why))
	}
	return u, nil
}

// verifiedHead returns the head of the target branch that build
// verification checks: its head now, which holds what the user committed
// there during the run (a task they fixed by hand, say) as well as what
// the run integrated. own is the run's last recorded head when the branch
// has moved on from it, else "". A branch reset under the run is a
// *worktree.ResetError.
func (p *Pipeline) verifiedHead(ctx context.Context, s State) (head, own string, err error) {
	recorded := s.Head.Get()
	if head, err = p.Repo.Head(ctx); err != nil || recorded == "" || head == recorded {
		return head, "", err
	}
	if err := p.Repo.CheckHead(ctx, s.RunID.Get(), recorded); err != nil {
		return "", "", err
	}
	return head, recorded, nil
}

// ownHeadPasses reports whether the run's own head passes the build, in
// the build worktree dir: known when it passed before, else built.
func (p *Pipeline) ownHeadPasses(ctx context.Context, s State, dir, own string) (bool, error) {
	if own == s.Verified.Get() {
		return true, nil
	}
	if _, err := gitOutput(ctx, dir, "reset", "-q", "--hard"); err != nil {
		return false, err
	}
	if _, err := gitOutput(ctx, dir, "checkout", "-q", "--detach", own); err != nil {
		return false, err
	}
	failure, err := p.checkBuild(ctx, dir)
	return failure == "", err
}

// checkBuild runs the build command and the verify command in dir and
// returns the failure, or "".
func (p *Pipeline) checkBuild(ctx context.Context, dir string) (string, error) {
	failure, _, err := p.check(ctx, dir, false)
	return failure, err
}

// check is checkBuild, which also says whether the build command failed
// (byBuild); with buildOnly, the verify command does not run.
func (p *Pipeline) check(ctx context.Context, dir string, buildOnly bool) (failure string, byBuild bool, err error) {
	if len(p.BuildCommand) > 0 {
		v, err := verify.Run(ctx, dir, verify.Spec{Command: p.BuildCommand}, p.VerifyOpts)
		if err != nil {
			return "", false, fmt.Errorf("build verification: %w", err)
		}
		if !v.Passed {
			// The first line says why: it is what the log shows.
			head := fmt.Sprintf("%s exited with code %d", strings.Join(p.BuildCommand, " "), v.ExitCode)
			if v.TimedOut {
				head = fmt.Sprintf("%s timed out after %s (verify.timeout) and was killed", strings.Join(p.BuildCommand, " "), v.Duration.Round(time.Millisecond))
			}
			if l := firstMeaningful(v.Output); l != "" {
				head += ": " + l
			}
			return head + "\n" + v.ErrorContext(4000), true, nil
		}
		if buildOnly {
			return "", false, nil
		}
	}
	v, err := verify.Run(ctx, dir, verify.Spec{Command: p.VerifyCommand}, p.VerifyOpts)
	if err != nil {
		return "", false, fmt.Errorf("build verification: %w", err)
	}
	return v.ErrorContext(4000), false, nil
}

// firstMeaningful returns the first line of out that is not empty nor a
// "# package" header.
func firstMeaningful(out string) string {
	for l := range strings.Lines(out) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "$ ") {
			return clip.Line(l, 160)
		}
	}
	return ""
}

// bisection finds the attempt whose integration broke the target branch.
// A "prefix" i is the branch as it was after the first i attempts, less
// the attempts reverted before (their reverts are applied to it too).
type bisection struct {
	p      *Pipeline
	s      State
	u      *State
	wt     *worktree.Worktree
	recs   []Attempt
	builds int
	// baseFailure is why prefix 0 failed, when it was built and did.
	baseFailure string
	// flaky: the branch as it failed passed when built again.
	flaky bool
	// head is the head of the branch that failed.
	head string
	// buildOnly: the build command is what failed on the head, and what
	// each prefix is judged by. The verify command may fail on the
	// branch before the run's first task (a project whose tests come
	// with its tasks), which says nothing of who broke the build.
	buildOnly bool
}

// run bisects over the attempts keys (in integration order); the head,
// which holds them all, failed with failure. It returns nil when the
// branch failed before the first of them too, or when it passed when built
// again (b.flaky).
//
// Prefix 0 passes (known when it is the head last verified, else built),
// prefix n fails: a binary search finds the first failing prefix k in
// about log2(n) builds, and attempt k is the culprit. When the culprit
// passes alone on prefix 0, it breaks the build together with an earlier
// attempt, found by a second search over prefix j plus the culprit.
func (b *bisection) run(ctx context.Context, keys []string, failure string) (*Culprit, error) {
	for _, k := range keys {
		if rec, ok := b.s.Attempts.Get(k); ok && rec.Integrated != "" && rec.Reverted == "" {
			b.recs = append(b.recs, rec)
		}
	}
	n := len(b.recs)
	if n == 0 {
		return nil, nil
	}
	b.log("bisecting over %d attempts: %s", n, strings.Join(b.names(0, n), ", "))
	base, err := gitOutput(ctx, b.wt.Path, "rev-parse", b.recs[0].Integrated+"^")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(base) != b.s.Verified.Get() {
		ok, err := b.build(ctx, 0, "")
		if err != nil || !ok {
			return nil, err
		}
	}
	hi, err := b.firstFailing(ctx, 0, n, "")
	if err != nil {
		return nil, err
	}
	if hi == n {
		// No build of the search failed: the one failure seen is the
		// head's. Before its last attempt is blamed and reverted, the
		// head is built again, so that a test that fails now and then
		// costs no one's work.
		ok, err := b.buildHead(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			b.flaky = true
			return nil, nil
		}
	}
	culprit := b.recs[hi-1]
	c := &Culprit{Attempt: attemptKey(culprit.TaskID, culprit.Attempt), Failure: failure}
	if hi > 1 {
		alone, err := b.build(ctx, 0, culprit.Integrated)
		if err != nil {
			return nil, err
		}
		if alone {
			// Prefix 0 plus the culprit passes, prefix hi-1 plus it (the
			// branch at the culprit) fails: the partner is in between.
			hi2, err := b.firstFailing(ctx, 0, hi-1, culprit.Integrated)
			if err != nil {
				return nil, err
			}
			partner := b.recs[hi2-1]
			c.Partner = attemptKey(partner.TaskID, partner.Attempt)
		}
	}
	text := fmt.Sprintf("bisection over %d attempts took %d builds: %s broke main", n, b.builds, c.Attempt)
	if c.Partner != "" {
		text += " together with " + c.Partner + " (each passes without the other)"
	}
	b.log("%s", text)
	return c, nil
}

// firstFailing returns the first prefix (plus with) that fails, by binary
// search between prefix lo, which passes, and prefix hi, which fails.
func (b *bisection) firstFailing(ctx context.Context, lo, hi int, with string) (int, error) {
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := b.build(ctx, mid, with)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// names lists the attempts of prefixes from..to.
func (b *bisection) names(from, to int) []string {
	var names []string
	for _, r := range b.recs[from:to] {
		names = append(names, attemptKey(r.TaskID, r.Attempt))
	}
	return names
}

func (b *bisection) log(format string, args ...any) {
	b.u.Log.Add(b.p.entry("", "bisect: "+format, args...))
}

// build checks out prefix i, plus the commit with when it is not "", in
// the build worktree, and builds it. A prefix that cannot be put together
// (a revert or a cherry-pick conflicts) counts as failing.
func (b *bisection) build(ctx context.Context, i int, with string) (bool, error) {
	b.builds++
	label := fmt.Sprintf("prefix %d of %d", i, len(b.recs))
	if i > 0 {
		label += " (through " + attemptKey(b.recs[i-1].TaskID, b.recs[i-1].Attempt) + ")"
	}
	if with != "" {
		label += " plus the suspect " + short(with)
	}
	if err := b.checkout(ctx, i, with); err != nil {
		b.log("build %d, %s: cannot be put together (%v); counted as failing", b.builds, label, clip.Line(err.Error(), 160))
		return false, nil
	}
	failure, _, err := b.p.check(ctx, b.wt.Path, b.buildOnly)
	if err != nil {
		return false, err
	}
	if failure == "" {
		b.log("build %d, %s: passes", b.builds, label)
		return true, nil
	}
	b.log("build %d, %s: fails: %s", b.builds, label, clip.Line(failure, 160))
	if i == 0 && with == "" {
		b.baseFailure = failure
	}
	return false, nil
}

// buildHead builds the head that failed, as it is, once more.
func (b *bisection) buildHead(ctx context.Context) (bool, error) {
	b.builds++
	for _, args := range [][]string{{"reset", "-q", "--hard"}, {"checkout", "-q", "--detach", b.head}} {
		if _, err := gitOutput(ctx, b.wt.Path, args...); err != nil {
			return false, err
		}
	}
	failure, _, err := b.p.check(ctx, b.wt.Path, b.buildOnly)
	if err != nil {
		return false, err
	}
	if failure == "" {
		b.log("build %d, main's head %s again: passes", b.builds, short(b.head))
		return true, nil
	}
	b.log("build %d, main's head %s again: fails: %s", b.builds, short(b.head), clip.Line(failure, 160))
	return false, nil
}

// checkout puts prefix i (plus the commit with) in the build worktree.
func (b *bisection) checkout(ctx context.Context, i int, with string) error {
	dir := b.wt.Path
	at := b.recs[0].Integrated + "^"
	if i > 0 {
		at = b.recs[i-1].Integrated
	}
	if _, err := gitOutput(ctx, dir, "reset", "-q", "--hard"); err != nil {
		return err
	}
	if _, err := gitOutput(ctx, dir, "checkout", "-q", "--detach", at); err != nil {
		return err
	}
	// The attempts reverted before are out of the branch: out of the
	// prefix too.
	for _, rec := range b.s.Attempts.Values() {
		if rec.Reverted == "" || rec.Integrated == "" {
			continue
		}
		if _, err := gitOutput(ctx, dir, "merge-base", "--is-ancestor", rec.Integrated, at); err != nil {
			continue
		}
		if _, err := gitOutput(ctx, dir, "merge-base", "--is-ancestor", rec.Reverted, at); err == nil {
			continue // its revert is in the prefix already: a retry came after it
		}
		if _, err := gitOutput(ctx, dir, "revert", "--no-commit", rec.Integrated); err != nil {
			return err
		}
	}
	if with != "" {
		if _, err := gitOutput(ctx, dir, "cherry-pick", "--no-commit", with); err != nil {
			return err
		}
	}
	return nil
}

func (p *Pipeline) buildRouter(_ context.Context, s State) (string, error) {
	switch {
	case s.Outcome.Get() != "":
		return graph.END, nil
	case len(s.Culprits.Get()) > 0:
		return NodeRevert, nil
	}
	// An escalation pending waits until select_task finds nothing else to
	// run.
	return NodeSelect, nil
}

// revertCulprits takes the culprits out of the target branch: one revert
// commit, integrated like an attempt (exactly once, by its trailer), on a
// fresh worktree at the branch's head. Each culprit's task fails with the
// build's failure as its error, so it is retried, or escalated when out of
// attempts. build_verification then checks the branch again.
func (p *Pipeline) revertCulprits(ctx context.Context, s State) (State, error) {
	var u State
	culprits := s.Culprits.Get()
	run := s.RunID.Get()
	n := s.Builds.Get()
	present, err := p.Repo.IntegratedAttempts(ctx)
	if err != nil {
		return u, fmt.Errorf("revert culprits: %w", err)
	}
	var sha string
	if present[fmt.Sprintf("%s/revert/%d", run, n)] != "" {
		// Integrated before a crash: the branch's head is the revert.
		if sha, err = p.Repo.Head(ctx); err != nil {
			return u, fmt.Errorf("revert culprits: %w", err)
		}
	} else if sha, err = p.revert(ctx, s, n, culprits); err != nil {
		return u, fmt.Errorf("revert culprits: %w", err)
	}
	p.crash("revert:after")
	u.Head.Set(sha)
	u.Culprits.Set(nil)
	tasks := tasksOf(s)
	var escs []Escalation
	for _, c := range culprits {
		rec, ok := s.Attempts.Get(c.Attempt)
		if !ok {
			continue
		}
		rec.Reverted = sha
		msg := "build verification on main failed after this task was integrated (it was reverted):\n" + c.Failure
		if c.Partner != "" {
			partner, _ := s.Attempts.Get(c.Partner)
			msg = fmt.Sprintf("build verification on main failed after this task was integrated (it was reverted): "+
				"it passes on its own, but breaks the build together with %s, integrated before it; make them work together:\n%s",
				partner.TaskID, c.Failure)
		}
		rec.Error = msg
		u.Attempts.Put(c.Attempt, rec)
		u.Log.Add(p.entry(rec.TaskID, "%s broke main; reverted it as %s", rec.TaskID, short(sha)))
		if t := findTask(tasks, rec.TaskID); t != nil {
			t.Status = planner.StatusInProgress
		}
		var escalate bool
		if tasks, escalate, err = scheduler.Fail(tasks, rec.TaskID, msg); err != nil {
			return u, err
		}
		if escalate {
			escs = append(escs, Escalation{TaskID: rec.TaskID, Reason: ReasonBuild, Error: msg})
		}
	}
	putChanged(&u, s, tasks)
	if len(escs) > 0 {
		u.Escalations.Set(append(slices.Clone(s.Escalations.Get()), escs...))
	}
	return u, nil
}

// revert makes and integrates the revert commit of culprits, newest
// first, and returns its commit on the branch.
func (p *Pipeline) revert(ctx context.Context, s State, n int, culprits []Culprit) (string, error) {
	wt, err := p.createWorktree(ctx, s.RunID.Get(), "revert", n, "")
	if err != nil {
		return "", err
	}
	defer func() { _ = p.Repo.Remove(context.WithoutCancel(ctx), wt) }()
	var names, reverts []string
	for i := len(culprits) - 1; i >= 0; i-- {
		rec, _ := s.Attempts.Get(culprits[i].Attempt)
		if _, err := gitOutput(ctx, wt.Path, "revert", "--no-commit", rec.Integrated); err != nil {
			return "", fmt.Errorf("revert %s: %w", culprits[i].Attempt, err)
		}
		names = append(names, rec.TaskID)
		// The reverted commit keeps its own trailer: this one says it
		// is out again, for whoever reads the branch later (a fork).
		reverts = append(reverts, worktree.RevertsKey+": "+trailerOf(s.RunID.Get(), culprits[i].Attempt, rec))
	}
	slices.Reverse(names)
	slices.Reverse(reverts)
	msg := fmt.Sprintf("Revert %s: it broke the build on main\n\n%s", strings.Join(names, ", "), strings.Join(reverts, "\n"))
	if _, _, err := p.Repo.Commit(ctx, wt, msg); err != nil {
		return "", fmt.Errorf("commit the revert: %w", err)
	}
	sha, conflicts, _, err := p.integrate(ctx, wt, s.Head.Get())
	if err != nil {
		return "", fmt.Errorf("integrate the revert: %w", err)
	}
	if len(conflicts) > 0 {
		return "", fmt.Errorf("integrate the revert: conflicts in %s", strings.Join(conflicts, ", "))
	}
	return sha, nil
}
