package worktree_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
