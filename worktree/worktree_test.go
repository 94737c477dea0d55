package worktree_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/worktree"
)

func TestParallelDisjointIntegrateInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"README.md": "hello\n"})
	m := open(t, repo, nil)
	ids := []string{"T1", "T2", "T3"}

	wts := make([]*worktree.Worktree, len(ids))
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Go(func() {
			w, err := m.Create(ctx, "r1", id, 1)
			if err != nil {
				errs[i] = err
				return
			}
			wts[i] = w
			content := fmt.Sprintf("package %s\n", strings.ToLower(id))
			if err := os.WriteFile(filepath.Join(w.Path, strings.ToLower(id)+".go"), []byte(content), 0o644); err != nil {
				errs[i] = err
				return
			}
			_, changed, err := m.Commit(ctx, w, "implement "+id)
			if err == nil && !changed {
				err = errors.New("nothing committed")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}

	// They "finished" in reverse order; the caller's task order decides.
	finished := []*worktree.Worktree{wts[2], wts[0], wts[1]}
	results := m.IntegrateAll(ctx, finished, []string{"T1", "T2", "T3"})
	require.Len(t, results, 3)
	for i, r := range results {
		require.NoError(t, r.Err)
		require.Equal(t, ids[i], r.Worktree.TaskID, "integration order")
		require.Equal(t, worktree.Integrated, r.Result.Outcome)
		require.Equal(t, i == 0, r.Result.FastForward, "only the first one can fast-forward")
	}
	require.Equal(t, []string{"r1/T3/1", "r1/T2/1", "r1/T1/1"}, trailers(t, repo, "main"))
	require.Equal(t, results[2].Result.Commit, gitT(t, repo, "rev-parse", "main"))

	// The repository folder has main checked out: its files follow, cleanly.
	for _, id := range ids {
		require.Equal(t, fmt.Sprintf("package %s\n", strings.ToLower(id)), read(t, repo, strings.ToLower(id)+".go"))
	}
	require.Empty(t, gitT(t, repo, "status", "--porcelain"))

	for _, w := range wts {
		require.NoError(t, m.Remove(ctx, w))
		require.NoDirExists(t, w.Path)
	}
	list, err := m.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
	require.Empty(t, gitT(t, repo, "for-each-ref", "refs/heads/taskloom/", "refs/taskloom/"),
		"integrated attempts leave no branch and no kept ref")
}

func TestConflictLeavesMainByteIdentical(t *testing.T) {
	t.Parallel()
	for _, checkedOut := range []bool{true, false} {
		t.Run(fmt.Sprintf("main checked out=%v", checkedOut), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			repo := setup(t, "repo", map[string]string{"a.txt": "one\ntwo\nthree\n", "b.txt": "b\n"})
			if !checkedOut {
				gitT(t, repo, "switch", "-q", "-c", "elsewhere")
			}
			m := open(t, repo, &worktree.Opts{MainBranch: "main"})
			w1 := committedAttempt(t, m, "T1", map[string]string{"a.txt": "one\nTWO by T1\nthree\n"})
			w2 := committedAttempt(t, m, "T2", map[string]string{
				"a.txt": "one\nTWO by T2\nthree\n", "b.txt": "b by T2\n", "c.txt": "new\n",
			})

			res, err := m.Integrate(ctx, w1)
			require.NoError(t, err)
			require.Equal(t, worktree.Integrated, res.Outcome)

			beforeRef := gitT(t, repo, "rev-parse", "main")
			before := snapshot(t, repo)
			res, err = m.Integrate(ctx, w2)
			var ce *worktree.ConflictError
			require.True(t, errors.As(err, &ce), "got %v, want a *ConflictError", err)
			require.ErrorIs(t, err, worktree.ErrConflict)
			require.Equal(t, []string{"a.txt"}, ce.Files)
			require.Equal(t, "r1/T2/1", ce.Attempt)
			require.Empty(t, res.Outcome)

			require.Equal(t, beforeRef, gitT(t, repo, "rev-parse", "main"), "main's ref moved")
			require.Equal(t, before, snapshot(t, repo), "the checkout changed")
			require.Equal(t, []string{"r1/T1/1"}, trailers(t, repo, "main"))
		})
	}
}

func TestResumeAfterCrashIntegratesExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"README.md": "hello\n"})

	// First process: T0 and T1 start; T0 integrates, so T1 will need a
	// cherry-pick; T1 commits, then the process dies.
	m1 := open(t, repo, nil)
	w0, err := m1.Create(ctx, "r1", "T0", 1)
	require.NoError(t, err)
	w1, err := m1.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	write(t, w0.Path, "zero.txt", "0\n")
	write(t, w1.Path, "one.txt", "1\n")
	_, _, err = m1.Commit(ctx, w0, "T0")
	require.NoError(t, err)
	_, err = m1.Integrate(ctx, w0)
	require.NoError(t, err)
	_, _, err = m1.Commit(ctx, w1, "T1")
	require.NoError(t, err)

	// Second process: finds the attempt and integrates it.
	m2 := open(t, repo, nil)
	got, err := m2.Get(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	require.Equal(t, w1, got)
	res, err := m2.Integrate(ctx, got)
	require.NoError(t, err)
	require.Equal(t, worktree.Integrated, res.Outcome)
	require.False(t, res.FastForward)

	// It dies before recording that; a third process tries again, twice.
	m3 := open(t, repo, nil)
	for range 2 {
		again, err := m3.Integrate(ctx, got)
		require.NoError(t, err)
		require.Equal(t, worktree.AlreadyIntegrated, again.Outcome)
		require.Equal(t, res.Commit, again.Commit)
	}
	// A Commit replayed on resume changes nothing either.
	_, _, err = m3.Commit(ctx, got, "T1 again")
	require.NoError(t, err)
	again, err := m3.Integrate(ctx, got)
	require.NoError(t, err)
	require.Equal(t, worktree.AlreadyIntegrated, again.Outcome)

	require.Equal(t, []string{"r1/T1/1", "r1/T0/1"}, trailers(t, repo, "main"))
	require.Equal(t, "1\n", read(t, repo, "one.txt"))
}

func TestCleanOrphans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"README.md": "hello\n"})
	m := open(t, repo, nil)
	committed, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	write(t, committed.Path, "work.txt", "unintegrated work\n")
	sha, _, err := m.Commit(ctx, committed, "T1")
	require.NoError(t, err)
	dirty, err := m.Create(ctx, "r1", "T2", 2)
	require.NoError(t, err)
	write(t, dirty.Path, "half.txt", "half done\n")
	kept, err := m.Create(ctx, "r1", "T3", 1)
	require.NoError(t, err)
	gone, err := m.Create(ctx, "r0", "T9", 1)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(gone.Path)) // its folder vanished, its branch did not
	broken, err := m.Create(ctx, "r0", "T7", 1)
	require.NoError(t, err)
	// git's record of it vanished, its folder and branch did not.
	require.NoError(t, os.RemoveAll(filepath.Join(repo, ".git", "worktrees", broken.Name())))
	stray := filepath.Join(repo, ".taskloom", "worktrees", "r0-T8-1")
	write(t, stray, "junk.txt", "x")

	// After a crash, a new process cleans up all but what it still needs.
	m2 := open(t, repo, nil)
	removed, err := m2.CleanOrphans(ctx, func(w *worktree.Worktree) bool { return w.ID() == kept.ID() })
	require.NoError(t, err)
	var names []string
	for _, w := range removed {
		names = append(names, w.ID())
	}
	require.Equal(t, []string{"r0/T7/1", "r0/T9/1", "r1/T1/1", "r1/T2/2"}, names)

	list, err := m2.List(ctx)
	require.NoError(t, err)
	require.Equal(t, []*worktree.Worktree{kept}, list)
	for _, p := range []string{committed.Path, dirty.Path, gone.Path, broken.Path, stray} {
		require.NoDirExists(t, p)
	}
	require.Equal(t, "refs/heads/taskloom/r1/T3/1", gitT(t, repo, "for-each-ref", "--format=%(refname)", "refs/heads/taskloom/"))
	require.Equal(t, sha, gitT(t, repo, "rev-parse", committed.KeptRef()), "unintegrated work is kept")

	// Nothing left to clean.
	removed, err = m2.CleanOrphans(ctx, func(*worktree.Worktree) bool { return true })
	require.NoError(t, err)
	require.Empty(t, removed)
}

func TestPathsWithSpacesAndUnicode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "my repo ☃ été", map[string]string{"dir with space/ünïcödé file.txt": "base\n"})
	m := open(t, repo, &worktree.Opts{Include: []string{"local cfg/*.ini"}})
	write(t, repo, "local cfg/naïve.ini", "secret=1\n")

	w1, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	w2, err := m.Create(ctx, "r1", "T2", 1)
	require.NoError(t, err)
	require.Equal(t, "secret=1\n", read(t, w1.Path, "local cfg/naïve.ini"))
	write(t, w1.Path, "new dir/café crème.txt", "T1\n")
	write(t, w1.Path, "dir with space/ünïcödé file.txt", "T1\n")
	write(t, w2.Path, "dir with space/ünïcödé file.txt", "T2\n")
	sha, changed, err := m.Commit(ctx, w1, "T1: ünïcödé")
	require.NoError(t, err)
	require.True(t, changed)
	require.ElementsMatch(t, []string{"dir with space/ünïcödé file.txt", "new dir/café crème.txt"}, committedFiles(t, repo, sha))
	_, _, err = m.Commit(ctx, w2, "T2")
	require.NoError(t, err)

	_, err = m.Integrate(ctx, w1)
	require.NoError(t, err)
	require.Equal(t, "T1\n", read(t, repo, "new dir/café crème.txt"))
	_, err = m.Integrate(ctx, w2)
	var ce *worktree.ConflictError
	require.True(t, errors.As(err, &ce), "got %v", err)
	require.Equal(t, []string{"dir with space/ünïcödé file.txt"}, ce.Files)
	require.NoError(t, m.Remove(ctx, w1))
	require.NoError(t, m.Remove(ctx, w2))
}

func TestIncludeCopiesEnvAndNeverCommitsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{".gitignore": ".env\n", "app.go": "package app\n"})
	write(t, repo, ".env", "TOKEN=abc\n")                 // ignored
	write(t, repo, "config/local.json", `{"debug":true}`) // untracked, not ignored
	write(t, repo, "config/other.txt", "not included\n")
	m := open(t, repo, &worktree.Opts{Include: []string{".env", "config/*.json"}})

	w, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	require.Equal(t, "TOKEN=abc\n", read(t, w.Path, ".env"))
	require.JSONEq(t, `{"debug":true}`, read(t, w.Path, "config/local.json"))
	require.NoFileExists(t, filepath.Join(w.Path, "config/other.txt"))

	write(t, w.Path, ".env", "TOKEN=changed by the worker\n")
	write(t, w.Path, "app.go", "package app\n\nfunc F() {}\n")
	sha, changed, err := m.Commit(ctx, w, "T1")
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, []string{"app.go"}, committedFiles(t, repo, sha))
}

func TestExcludedFilesAreNeverCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{".gitignore": "*.log\nbuild/\n"})
	m := open(t, repo, nil)
	exclude := filepath.Join(gitT(t, repo, "rev-parse", "--path-format=absolute", "--git-common-dir"), "info", "exclude")
	f, err := os.OpenFile(exclude, os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString("secret.txt\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	w, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	for _, p := range []string{"app.log", "sub/deep.log", "build/out.bin", "secret.txt", "sub/secret.txt"} {
		write(t, w.Path, p, "must not be committed\n")
	}
	write(t, w.Path, "ok.txt", "fine\n")
	sha, changed, err := m.Commit(ctx, w, "T1")
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, []string{"ok.txt"}, committedFiles(t, repo, sha))
	_, err = m.Integrate(ctx, w)
	require.NoError(t, err)
	require.NoFileExists(t, filepath.Join(repo, "app.log"))
	require.Equal(t, "fine\n", read(t, repo, "ok.txt"))
}

func TestMainNotCheckedOutInTheMainFolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("checked out nowhere", func(t *testing.T) {
		t.Parallel()
		repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
		gitT(t, repo, "switch", "-q", "-c", "feature")
		write(t, repo, "a.txt", "feature's uncommitted edit\n") // not main's checkout: allowed
		before := snapshot(t, repo)
		m := open(t, repo, &worktree.Opts{MainBranch: "main"})
		require.Equal(t, "main", m.MainBranch())
		w, err := m.Create(ctx, "r1", "T1", 1)
		require.NoError(t, err)
		require.Equal(t, "a\n", read(t, w.Path, "a.txt"), "attempts start from main, not from the folder's branch")
		write(t, w.Path, "b.txt", "b\n")
		_, _, err = m.Commit(ctx, w, "T1")
		require.NoError(t, err)
		res, err := m.Integrate(ctx, w)
		require.NoError(t, err)
		require.Equal(t, worktree.Integrated, res.Outcome)
		require.Equal(t, res.Commit, gitT(t, repo, "rev-parse", "main"))
		require.Equal(t, "b", gitT(t, repo, "show", "main:b.txt"))
		require.Equal(t, before, snapshot(t, repo), "the folder's own checkout must not change")
	})

	t.Run("checked out in another worktree", func(t *testing.T) {
		t.Parallel()
		repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
		gitT(t, repo, "switch", "-q", "-c", "feature")
		elsewhere := filepath.Join(t.TempDir(), "main checkout")
		gitT(t, repo, "worktree", "add", "-q", elsewhere, "main")
		before := snapshot(t, repo)

		// By default the main branch is the folder's: say which one.
		m := open(t, repo, &worktree.Opts{MainBranch: "main"})
		w1 := committedAttempt(t, m, "T1", map[string]string{"b.txt": "b\n"})
		w2 := committedAttempt(t, m, "T2", map[string]string{"c.txt": "c\n"})
		for _, r := range m.IntegrateAll(ctx, []*worktree.Worktree{w1, w2}, nil) {
			require.NoError(t, r.Err)
		}
		require.Equal(t, "b\n", read(t, elsewhere, "b.txt"))
		require.Equal(t, "c\n", read(t, elsewhere, "c.txt"))
		require.Empty(t, gitT(t, elsewhere, "status", "--porcelain"))
		require.Equal(t, gitT(t, repo, "rev-parse", "main"), gitT(t, elsewhere, "rev-parse", "HEAD"))
		require.Equal(t, before, snapshot(t, repo), "the folder's own checkout must not change")

		// Local edits in the way there are refused, and main stays put.
		w3, err := m.Create(ctx, "r1", "T3", 1)
		require.NoError(t, err)
		write(t, w3.Path, "a.txt", "T3\n")
		_, _, err = m.Commit(ctx, w3, "T3")
		require.NoError(t, err)
		write(t, elsewhere, "a.txt", "a human's edit\n")
		mainBefore := snapshot(t, elsewhere)
		_, err = m.Integrate(ctx, w3)
		require.ErrorIs(t, err, worktree.ErrDirty)
		require.ErrorContains(t, err, "a.txt")
		require.ErrorContains(t, err, "commit, stash or move them")
		require.Equal(t, mainBefore, snapshot(t, elsewhere))
		gitT(t, elsewhere, "checkout", "--", "a.txt")

		// Nor does a commit that adds a file the user's checkout holds
		// ignored (a worker's git add -f) write over theirs.
		exclude := gitT(t, elsewhere, "rev-parse", "--path-format=absolute", "--git-path", "info/exclude")
		f, err := os.OpenFile(exclude, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		_, err = f.WriteString("\n.env\n")
		require.NoError(t, errors.Join(err, f.Close()))
		write(t, elsewhere, ".env", "DATABASE_URL=the user's\n")
		w4, err := m.Create(ctx, "r1", "T4", 1)
		require.NoError(t, err)
		write(t, w4.Path, ".env", "DATABASE_URL=the worker's\n")
		gitT(t, w4.Path, "add", "-f", ".env")
		_, _, err = m.Commit(ctx, w4, "T4")
		require.NoError(t, err)
		_, err = m.Integrate(ctx, w4)
		require.ErrorIs(t, err, worktree.ErrDirty)
		require.ErrorContains(t, err, ".env")
		require.Equal(t, "DATABASE_URL=the user's\n", read(t, elsewhere, ".env"))
	})
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("refuses uncommitted changes to tracked files", func(t *testing.T) {
		t.Parallel()
		repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
		write(t, repo, "a.txt", "edited\n")
		_, err := worktree.Open(ctx, repo, nil)
		require.ErrorIs(t, err, worktree.ErrDirty)
		var de *worktree.DirtyError
		require.True(t, errors.As(err, &de))
		require.Equal(t, []string{"a.txt"}, de.Files)
		require.ErrorContains(t, err, "commit or stash them")
		require.Empty(t, de.Locks)

		// A merge killed midway (the process and its git child) leaves its
		// changes staged and git's locks behind: the error says so, rather
		// than take them for the user's edits.
		write(t, repo, ".git/index.lock", "")
		write(t, repo, ".git/refs/heads/main.lock", "")
		_, err = worktree.Open(ctx, repo, nil)
		require.ErrorIs(t, err, worktree.ErrDirty)
		require.True(t, errors.As(err, &de))
		require.Equal(t, []string{filepath.Join(repo, ".git", "index.lock"), filepath.Join(repo, ".git", "refs", "heads", "main.lock")}, de.Locks)
		require.ErrorContains(t, err, "a git command stopped midway there")
	})

	t.Run("untracked files are fine, and .taskloom/ is excluded once", func(t *testing.T) {
		t.Parallel()
		repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
		write(t, repo, "scratch.txt", "untracked\n")
		open(t, repo, nil)
		open(t, repo, nil)
		exclude := read(t, repo, ".git/info/exclude")
		require.Equal(t, 1, strings.Count(exclude, ".taskloom/\n"), "exclude file: %q", exclude)
		write(t, repo, ".taskloom/taskloom.db", "x")
		require.Equal(t, "?? scratch.txt", gitT(t, repo, "status", "--porcelain"))
	})

	t.Run("main branch defaults to the folder's branch", func(t *testing.T) {
		t.Parallel()
		repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
		gitT(t, repo, "switch", "-q", "-c", "trunk")
		require.Equal(t, "trunk", open(t, repo, nil).MainBranch())
		gitT(t, repo, "switch", "-q", "--detach")
		require.Equal(t, "main", open(t, repo, nil).MainBranch())
	})

	t.Run("a missing main branch is an error", func(t *testing.T) {
		t.Parallel()
		repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
		_, err := worktree.Open(ctx, repo, &worktree.Opts{MainBranch: "nope"})
		require.ErrorContains(t, err, `main branch "nope"`)
	})
}

func TestCommitAndIntegrateEdgeCases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	m := open(t, repo, nil)
	base := gitT(t, repo, "rev-parse", "main")

	t.Run("nothing changed", func(t *testing.T) {
		w, err := m.Create(ctx, "r1", "T1", 1)
		require.NoError(t, err)
		sha, changed, err := m.Commit(ctx, w, "T1")
		require.NoError(t, err)
		require.False(t, changed)
		require.Equal(t, base, sha)
		require.Equal(t, base, gitT(t, repo, "rev-parse", "refs/heads/"+w.Branch), "no empty commit")
		res, err := m.Integrate(ctx, w)
		require.NoError(t, err)
		require.Equal(t, worktree.NothingToIntegrate, res.Outcome)
		require.Equal(t, base, gitT(t, repo, "rev-parse", "main"))
		require.NoError(t, m.Remove(ctx, w))
		require.Empty(t, gitT(t, repo, "for-each-ref", "refs/taskloom/"), "nothing to keep")
	})

	t.Run("the worker's own commits fold into one", func(t *testing.T) {
		w, err := m.Create(ctx, "r1", "T2", 1)
		require.NoError(t, err)
		write(t, w.Path, "x.txt", "x\n")
		gitT(t, w.Path, "add", "x.txt")
		gitT(t, w.Path, "commit", "-q", "-m", "worker's own commit")
		write(t, w.Path, "y.txt", "y\n")
		_, err = m.Integrate(ctx, w)
		require.ErrorContains(t, err, "commit them first")

		sha, changed, err := m.Commit(ctx, w, "T2")
		require.NoError(t, err)
		require.True(t, changed)
		require.Equal(t, base, gitT(t, repo, "rev-parse", sha+"^"), "one commit on top of the start")
		require.ElementsMatch(t, []string{"x.txt", "y.txt"}, committedFiles(t, repo, sha))
		require.Equal(t, []string{"r1/T2/1"}, trailers(t, repo, sha))

		write(t, w.Path, "z.txt", "z\n")
		sha2, changed, err := m.Commit(ctx, w, "T2, second try")
		require.NoError(t, err)
		require.True(t, changed)
		require.Equal(t, base, gitT(t, repo, "rev-parse", sha2+"^"), "a second Commit folds into the first")
		require.ElementsMatch(t, []string{"x.txt", "y.txt", "z.txt"}, committedFiles(t, repo, sha2))
		require.NoError(t, m.Remove(ctx, w))
		require.Equal(t, sha2, gitT(t, repo, "rev-parse", w.KeptRef()), "unintegrated work is kept")
	})

	t.Run("create twice", func(t *testing.T) {
		_, err := m.Create(ctx, "r1", "T3", 1)
		require.NoError(t, err)
		_, err = m.Create(ctx, "r1", "T3", 1)
		require.ErrorIs(t, err, worktree.ErrExists)
		_, err = m.Get(ctx, "r1", "T4", 1)
		require.ErrorIs(t, err, worktree.ErrNotFound)
	})

	t.Run("bad IDs", func(t *testing.T) {
		for _, c := range []struct {
			run, task string
			attempt   int
		}{{"r1", "T 1", 1}, {"r1", "../x", 1}, {"", "T1", 1}, {"r1", "T1", 0}, {"r/1", "T1", 1}} {
			_, err := m.Create(ctx, c.run, c.task, c.attempt)
			require.Error(t, err, "%+v", c)
		}
	})
}

// TestTwoManagersIntegrateConcurrently stands for two processes that
// integrate into the same main at once: every attempt lands exactly once.
func TestTwoManagersIntegrateConcurrently(t *testing.T) {
	t.Parallel()
	for _, checkedOut := range []bool{true, false} {
		t.Run(fmt.Sprintf("main checked out=%v", checkedOut), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			repo := setup(t, "repo", map[string]string{"README.md": "hello\n"})
			if !checkedOut {
				gitT(t, repo, "switch", "-q", "--detach")
			}
			managers := []*worktree.Manager{open(t, repo, &worktree.Opts{MainBranch: "main"}), open(t, repo, &worktree.Opts{MainBranch: "main"})}
			const perManager = 4
			var wts [2][]*worktree.Worktree
			for k, m := range managers {
				for i := range perManager {
					w, err := m.Create(ctx, fmt.Sprintf("r%d", k), fmt.Sprintf("T%d", i), 1)
					require.NoError(t, err)
					write(t, w.Path, fmt.Sprintf("m%d/t%d.txt", k, i), "x\n")
					_, _, err = m.Commit(ctx, w, "work")
					require.NoError(t, err)
					wts[k] = append(wts[k], w)
				}
			}
			var wg sync.WaitGroup
			results := make([][]worktree.Integration, 2)
			for k, m := range managers {
				wg.Go(func() { results[k] = m.IntegrateAll(ctx, wts[k], nil) })
			}
			wg.Wait()
			for _, rs := range results {
				for _, r := range rs {
					require.NoError(t, r.Err)
					require.Equal(t, worktree.Integrated, r.Result.Outcome)
				}
			}
			got := trailers(t, repo, "main")
			require.Len(t, got, 2*perManager)
			require.ElementsMatch(t, []string{"r0/T0/1", "r0/T1/1", "r0/T2/1", "r0/T3/1", "r1/T0/1", "r1/T1/1", "r1/T2/1", "r1/T3/1"}, got)
			if checkedOut {
				require.Empty(t, gitT(t, repo, "status", "--porcelain"))
				require.Equal(t, "x\n", read(t, repo, "m1/t3.txt"))
			}
		})
	}
}

// A worktree whose .git file a worker pointed at another attempt's git
// metadata is broken, its own fault: the guard never puts the other
// attempt's HEAD back, nor blames it.
func TestGitFilePointedAtAnotherAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"a.txt": "a\n"})
	m := open(t, repo, nil)
	w1, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	w2, err := m.Create(ctx, "r1", "T2", 1)
	require.NoError(t, err)
	g2, err := m.Guard(ctx, w2)
	require.NoError(t, err)
	g1, err := m.Guard(ctx, w1)
	require.NoError(t, err)
	other := gitT(t, w2.Path, "rev-parse", "--absolute-git-dir")
	write(t, w1.Path, ".git", "gitdir: "+other+"\n")
	require.ErrorIs(t, m.Check(w1), worktree.ErrBroken)
	require.ErrorContains(t, m.Check(w1), "the git metadata of another worktree")
	require.ErrorIs(t, m.Restore(ctx, g1), worktree.ErrBroken)
	require.NoError(t, m.Restore(ctx, g2), "T2 did nothing")
	require.Equal(t, "refs/heads/"+w2.Branch, gitT(t, w2.Path, "symbolic-ref", "HEAD"))
}
