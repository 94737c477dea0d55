package worktree_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/worktree"
)

// A user who resets main under an attempt (dropping their own commit the
// attempt started from) must not see that commit come back: the attempt's
// commit holds only the attempt's work, and Integrate refuses it with a
// *ResetError, leaving main where the user put it.
func TestMainResetUnderAttemptIsNotUndone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	start := gitT(t, repo, "rev-parse", "main")
	write(t, repo, "user.txt", "the user's change\n")
	gitT(t, repo, "add", "user.txt")
	gitT(t, repo, "commit", "-q", "-m", "user commit")
	user := gitT(t, repo, "rev-parse", "main")

	m := open(t, repo, nil)
	w, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	require.Equal(t, user, w.Base)
	gitT(t, repo, "reset", "-q", "--hard", "HEAD~1") // the user drops their commit

	write(t, w.Path, "t1.txt", "T1\n")
	// A fresh manager finds the base again, as a resumed run does.
	m2 := open(t, repo, nil)
	w2, err := m2.Get(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	require.Equal(t, user, w2.Base, "Get recovers the base from the branch's creation")
	sha, changed, err := m2.Commit(ctx, w2, "T1")
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, []string{"t1.txt"}, committedFiles(t, repo, sha), "only the attempt's own work is committed")
	require.Equal(t, user, gitT(t, repo, "rev-parse", sha+"^"))

	_, err = m2.Integrate(ctx, w2)
	var re *worktree.ResetError
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, worktree.ErrReset)
	require.Equal(t, user, re.Recorded)
	require.Equal(t, start, re.Now)
	require.Equal(t, fmt.Sprintf(`main was reset or rewritten under run r1: it was at %s, now at %s; restore it, or run "taskloom resume r1 --accept-head"`,
		user[:7], start[:7]), err.Error())
	require.Equal(t, start, gitT(t, repo, "rev-parse", "main"), "main stays where the user put it")
	_, statErr := os.Stat(repo + "/user.txt")
	require.True(t, errors.Is(statErr, os.ErrNotExist), "the dropped file stays dropped")
}

func TestCheckHeadAndIntegratedAttempts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	m := open(t, repo, nil)
	start, err := m.Head(ctx)
	require.NoError(t, err)
	w := committedAttempt(t, m, "T1", map[string]string{"t1.txt": "T1\n"})
	res, err := m.Integrate(ctx, w)
	require.NoError(t, err)

	require.NoError(t, m.CheckHead(ctx, "r1", start))
	require.NoError(t, m.CheckHead(ctx, "r1", res.Commit))
	got, err := m.IntegratedAttempts(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"r1/T1/1": res.Commit}, got)

	gitT(t, repo, "reset", "-q", "--hard", start)
	err = m.CheckHead(ctx, "r1", res.Commit)
	var re *worktree.ResetError
	require.ErrorAs(t, err, &re)
	require.Equal(t, res.Commit, re.Recorded)
	require.Equal(t, start, re.Now)
	got, err = m.IntegratedAttempts(ctx)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestLockBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	m := open(t, repo, nil)
	unlock, err := m.LockBranch(ctx, "r1")
	require.NoError(t, err)

	_, err = open(t, repo, nil).LockBranch(ctx, "r2")
	var le *worktree.LiveError
	require.ErrorAs(t, err, &le)
	host, _ := os.Hostname()
	require.Equal(t, fmt.Sprintf("run r1 is live on main (pid %d, host %s): wait for it or stop it", os.Getpid(), host), err.Error())

	// Another branch has its own live run.
	gitT(t, repo, "branch", "other")
	unlockOther, err := open(t, repo, &worktree.Opts{MainBranch: "other"}).LockBranch(ctx, "r3")
	require.NoError(t, err)
	unlockOther()

	unlock()
	unlock2, err := m.LockBranch(ctx, "r2")
	require.NoError(t, err, "an ended run does not block the next")
	unlock2()
}

// A new run integrates into the branch checked out; on a detached HEAD
// there is none, and Open says so rather than pick "main".
func TestOpenNeedsABranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	gitT(t, repo, "checkout", "-q", "--detach")
	_, err := worktree.Open(ctx, repo, &worktree.Opts{NeedBranch: true})
	require.ErrorContains(t, err, "HEAD is detached in ")
	require.ErrorContains(t, err, ": check out the branch the run should integrate into")
	m, err := worktree.Open(ctx, repo, &worktree.Opts{NeedBranch: true, MainBranch: "main"})
	require.NoError(t, err, "a resumed run knows its branch")
	require.Equal(t, "main", m.MainBranch())
}
