package worktree_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/worktree"
)

// TestCreateAfterAHalfAddedWorktree: a process killed while git added an
// attempt's worktree leaves git's record of it, locked "initializing",
// with no folder. Creating that attempt again clears the stale record; a
// lock a user set on another worktree is left alone.
func TestCreateAfterAHalfAddedWorktree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"README.md": "hello\n"})
	m := open(t, repo, nil)
	path := filepath.Join(repo, ".taskloom", "worktrees", "r1-T1-1")
	gitT(t, repo, "worktree", "add", "-q", "--lock", "--reason", "initializing", "-b", "half", path, "HEAD")
	require.NoError(t, os.RemoveAll(path))
	gitT(t, repo, "update-ref", "-d", "refs/heads/half")
	mine := filepath.Join(t.TempDir(), "usb-stick")
	gitT(t, repo, "worktree", "add", "-q", "--lock", "--reason", "on a removable disk", "-b", "mine", mine, "HEAD")
	require.NoError(t, os.RemoveAll(mine))

	w, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	require.Equal(t, path, w.Path)
	require.FileExists(t, filepath.Join(w.Path, "README.md"))
	require.Contains(t, gitT(t, repo, "worktree", "list"), "usb-stick", "the user's locked worktree is kept")
}

// TestLocksAKilledGitLeft: git's lock files that a process killed mid-way
// left on an attempt's branch or in its git folder do not stop the
// attempt's worktree from being made again or repaired.
func TestLocksAKilledGitLeft(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"README.md": "hello\n"})
	m := open(t, repo, nil)
	refLock := filepath.Join(repo, ".git", "refs", "heads", "taskloom", "r1", "T1", "1.lock")
	require.NoError(t, os.MkdirAll(filepath.Dir(refLock), 0o755))
	require.NoError(t, os.WriteFile(refLock, nil, 0o644))
	w, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err, "a lock on the branch to be made")

	gitDir := gitT(t, w.Path, "rev-parse", "--absolute-git-dir")
	for _, f := range []string{filepath.Join(gitDir, "HEAD.lock"), filepath.Join(gitDir, "index.lock"), refLock} {
		require.NoError(t, os.WriteFile(f, nil, 0o644))
	}
	write(t, w.Path, "b.txt", "b\n")
	_, _, err = m.Commit(ctx, w, "T1: b")
	require.Error(t, err, "the locks stop git")
	fixed, err := m.Repair(w)
	require.NoError(t, err)
	require.Len(t, fixed, 3, "%v", fixed)
	_, _, err = m.Commit(ctx, w, "T1: b")
	require.NoError(t, err)
}

// TestIntegrateWaitsForAGitLock: a lock in main's checkout (a user's git
// command running there) is waited for; one that stays is named, with
// main unchanged, rather than taken for local changes or a moving main.
func TestIntegrateWaitsForAGitLock(t *testing.T) {
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"README.md": "hello\n"})
	m := open(t, repo, nil)
	lock := filepath.Join(repo, ".git", "index.lock")
	head := gitT(t, repo, "rev-parse", "main")

	defer worktree.SetLockWait(300*time.Millisecond, 20*time.Millisecond)()
	w1 := committedAttempt(t, m, "T1", map[string]string{"a.txt": "a\n"})
	require.NoError(t, os.WriteFile(lock, nil, 0o644))
	_, err := m.Integrate(ctx, w1)
	var le *worktree.LockError
	require.ErrorAs(t, err, &le)
	require.Equal(t, lock, le.Path)
	require.Contains(t, err.Error(), "if none is running, delete the file")
	require.Equal(t, head, gitT(t, repo, "rev-parse", "main"))

	defer worktree.SetLockWait(10*time.Second, 20*time.Millisecond)()
	time.AfterFunc(200*time.Millisecond, func() { _ = os.Remove(lock) })
	res, err := m.Integrate(ctx, w1)
	require.NoError(t, err)
	require.Equal(t, worktree.Integrated, res.Outcome)
	require.Equal(t, "a\n", read(t, repo, "a.txt"))
}
