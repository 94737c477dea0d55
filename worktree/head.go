package worktree

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// ErrReset: the target branch no longer contains a head that a run
// recorded (see *ResetError).
var ErrReset = errors.New("branch was reset or rewritten")

// ResetError says that the target branch was reset or rewritten under a
// run: it no longer contains Recorded, the head the run last recorded (the
// head it started from or last integrated, or an attempt's base). Nothing
// was changed: taskloom never redoes or undoes what the user did to the
// branch.
type ResetError struct {
	Branch   string
	Run      string
	Recorded string
	Now      string
	// Flags go with the resume command it suggests (" --db URL"), so
	// that the command finds the run's store.
	Flags string
}

func (e *ResetError) Error() string {
	return fmt.Sprintf("%s was reset or rewritten under run %s: it was at %s, now at %s; restore it, or run \"taskloom resume %s%s --accept-head\"",
		e.Branch, e.Run, shortSHA(e.Recorded), shortSHA(e.Now), e.Run, e.Flags)
}

// Is makes errors.Is(err, ErrReset) true.
func (e *ResetError) Is(target error) bool { return target == ErrReset }

func shortSHA(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// Head returns the target branch's head commit.
func (m *Manager) Head(context.Context) (string, error) {
	head, err := readRef(m.commonDir, m.mainRef)
	if err != nil {
		return "", fmt.Errorf("read the head of %s: %w", m.mainBranch, err)
	}
	return head, nil
}

// CheckHead returns a *ResetError naming run when the target branch no
// longer contains recorded. An empty recorded checks nothing.
func (m *Manager) CheckHead(ctx context.Context, run, recorded string) error {
	if recorded == "" {
		return nil
	}
	head, err := m.Head(ctx)
	if err != nil {
		return err
	}
	return m.checkContains(ctx, run, recorded, head)
}

// checkContains returns a *ResetError when head does not descend from
// recorded (or recorded is not a commit any more).
func (m *Manager) checkContains(_ context.Context, run, recorded, head string) error {
	if recorded == head {
		return nil
	}
	ok, err := m.objects.isAncestor(recorded, head)
	switch {
	case err == nil && ok:
		return nil
	case err == nil, errors.Is(err, plumbing.ErrObjectNotFound) && m.objects.has(head):
		// Not an ancestor, or the recorded commit is gone entirely (a gc
		// after the reset).
		return &ResetError{Branch: m.mainBranch, Run: run, Recorded: recorded, Now: head}
	default:
		return fmt.Errorf("check that %s contains %s: %w", m.mainBranch, shortSHA(recorded), err)
	}
}

// IntegratedAttempts returns the attempts whose trailer
// ("Taskloom-Task: RUN/TASK/N") is in the target branch's history, as
// "RUN/TASK/N", each with the newest commit that carries it. Trailers
// survive a rebase or a cherry-pick, so an attempt whose commit was
// rewritten still counts.
func (m *Manager) IntegratedAttempts(ctx context.Context) (map[string]string, error) {
	return m.trailersOnMain(ctx, TrailerKey)
}

// RevertedAttempts returns the attempts that a revert commit on the target
// branch took back out, by their "Taskloom-Reverts: RUN/TASK/N" trailers,
// each with that revert commit.
func (m *Manager) RevertedAttempts(ctx context.Context) (map[string]string, error) {
	return m.trailersOnMain(ctx, RevertsKey)
}

// trailersOnMain returns the values of the trailer key in the target
// branch's history, each with the newest commit that carries it.
func (m *Manager) trailersOnMain(ctx context.Context, key string) (map[string]string, error) {
	out, err := m.git(ctx, m.root, "log", "--fixed-strings", "--grep="+key+": ",
		"--format=%H%x00%(trailers:key="+key+",valueonly,separator=%x00)", m.mainRef, "--")
	if err != nil {
		return nil, fmt.Errorf("list the attempts on %s: %w", m.mainBranch, err)
	}
	found := make(map[string]string)
	for line := range strings.SplitSeq(out, "\n") {
		sha, trailers, _ := strings.Cut(line, "\x00")
		for v := range strings.SplitSeq(trailers, "\x00") {
			if v = strings.TrimSpace(v); v != "" && found[v] == "" {
				found[v] = sha
			}
		}
	}
	return found, nil
}

// AttemptOfBranch returns the "RUN/TASK/N" an attempt branch
// (taskloom/RUN/TASK/N) names: its trailer value.
func AttemptOfBranch(branch string) (string, bool) {
	return strings.CutPrefix(branch, branchPrefix)
}
