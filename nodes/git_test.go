package nodes

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// In a worktree whose .git a worker deleted, git finds no repository: it
// does not fall through to the user's, which contains the worktree, to
// report its changes or reset them away.
func TestGitInAWorktreeWithoutGit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := t.TempDir()
	wt := filepath.Join(repo, ".taskloom", "worktrees", "w")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"}, {"worktree", "add", "-q", "-b", "b1", wt}} {
		_, err := gitOutput(ctx, repo, args...)
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(filepath.Join(repo, "mine.txt"), []byte("the user's work\n"), 0o644))
	_, err := gitOutput(ctx, repo, "add", "mine.txt")
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(wt, ".git")))

	diff, err := WorktreeDiff(unconfined)(ctx, wt)
	require.ErrorContains(t, err, "not a git repository")
	require.NotContains(t, diff, "mine.txt")
	_, err = gitOutput(ctx, wt, "reset", "-q", "--hard")
	require.ErrorContains(t, err, "not a git repository")
	data, err := os.ReadFile(filepath.Join(repo, "mine.txt"))
	require.NoError(t, err)
	require.Equal(t, "the user's work\n", string(data))
	status, err := gitOutput(ctx, repo, "status", "--porcelain")
	require.NoError(t, err)
	require.Equal(t, "A  mine.txt\n", status)
}
