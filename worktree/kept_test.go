package worktree_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeepAndDropKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"README.md": "hello\n"})
	m := open(t, repo, nil)

	w, err := m.Create(ctx, "r1", "T1", 2)
	require.NoError(t, err)
	write(t, w.Path, "a.txt", "a\n")
	sha, changed, err := m.Commit(ctx, w, "T1: a")
	require.NoError(t, err)
	require.True(t, changed)
	// The branch goes some other way than Remove (by hand, say): Keep
	// still makes the ref a reviewer is shown.
	require.NoError(t, m.Remove(ctx, w))
	gitT(t, repo, "update-ref", "-d", w.KeptRef())
	ref, err := m.Keep(ctx, "r1", "T1", 2, sha)
	require.NoError(t, err)
	require.Equal(t, "refs/taskloom/attempts/r1/T1/2", ref)
	require.Contains(t, gitT(t, repo, "show", ref), "+a")
	again, err := m.Keep(ctx, "r1", "T1", 2, sha)
	require.NoError(t, err, "idempotent")
	require.Equal(t, ref, again)

	// Another run's kept refs stay when this run ends.
	gitT(t, repo, "update-ref", "refs/taskloom/attempts/r2/T1/1", sha)
	n, err := m.DropKept(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "refs/taskloom/attempts/r2/T1/1", gitT(t, repo, "for-each-ref", "--format=%(refname)", "refs/taskloom/"))
	n, err = m.DropKept(ctx, "r1")
	require.NoError(t, err)
	require.Zero(t, n)
}
