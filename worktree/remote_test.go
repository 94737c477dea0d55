package worktree_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/worktree"
)

// A remote that stops answering fails the push, the fetch and the
// clean-up after the remote timeout, each in one line, instead of hanging
// the run; a remote that answers is unaffected.
func TestRemoteThatStopsAnsweringTimesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"README.md": "hello\n"})
	bare := filepath.Join(t.TempDir(), "shared.git")
	gitT(t, repo, "init", "-q", "--bare", bare)
	gitT(t, repo, "remote", "add", "origin", bare)
	gitT(t, repo, "remote", "add", "stalled", bare)
	// Over a local path, git starts these programs through the shell.
	gitT(t, repo, "config", "remote.stalled.receivepack", "sleep 60; git-receive-pack")
	gitT(t, repo, "config", "remote.stalled.uploadpack", "sleep 60; git-upload-pack")
	// Long enough for the remote that answers on a loaded machine.
	m := open(t, repo, &worktree.Opts{RemoteTimeout: 2 * time.Second})
	head := strings.TrimSpace(gitT(t, repo, "rev-parse", "HEAD"))
	base := worktree.BaseRef("r1", "T1", 1)

	require.NoError(t, m.Push(ctx, "origin", head, base))
	got, err := m.Fetch(ctx, "origin", base, "r1")
	require.NoError(t, err)
	require.Equal(t, head, got)

	err = m.Push(ctx, "stalled", head, base)
	require.ErrorIs(t, err, proc.ErrTimeout)
	require.EqualError(t, err, "push "+base+" to stalled: git push: no answer in 2s: command timed out")
	_, err = m.Fetch(ctx, "stalled", base, "r1")
	require.ErrorIs(t, err, proc.ErrTimeout)
	_, err = m.DropRemote(ctx, "stalled", "r1")
	require.ErrorIs(t, err, proc.ErrTimeout)

	n, err := m.DropRemote(ctx, "origin", "r1")
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// Clones of one repository share its Project, whatever their remotes are
// called; another repository's is not theirs; a shallow clone cannot
// tell, and takes any.
func TestProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := setup(t, "a", map[string]string{"a.txt": "a\n"})
	gitT(t, a, "commit", "-q", "--allow-empty", "-m", "second")
	b := filepath.Join(t.TempDir(), "b")
	gitT(t, a, "clone", "-q", a, b)
	other := setup(t, "other", map[string]string{"other.txt": "another project\n"})
	shallow := filepath.Join(t.TempDir(), "shallow")
	gitT(t, a, "clone", "-q", "--depth=1", "file://"+a, shallow)

	pa := open(t, a, nil).Project(ctx)
	require.Len(t, pa, 40)
	require.Equal(t, pa, open(t, b, nil).Project(ctx))
	// Another history merged into a's main later leaves its name, which
	// b, a clone from before, still shares.
	gitT(t, a, "fetch", "-q", other, "main")
	gitT(t, a, "merge", "-q", "--allow-unrelated-histories", "-m", "merge another history", "FETCH_HEAD")
	require.Equal(t, pa, open(t, a, nil).Project(ctx))
	require.True(t, open(t, b, nil).SameProject(ctx, pa))
	require.False(t, open(t, other, nil).SameProject(ctx, pa))
	require.True(t, open(t, other, nil).SameProject(ctx, ""), "a job that names none")
	require.Empty(t, open(t, shallow, nil).Project(ctx))
	require.True(t, open(t, shallow, nil).SameProject(ctx, pa))
}
