package worktree_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/worktree"
)

// A removed attempt's worktree is reused by the next Create: the new
// attempt sees main's head in full and nothing the last attempt left
// (untracked, ignored, staged or in git's admin folder), its branch starts
// at main's head, and ReleaseIdle leaves only the main checkout.
func TestRemovedWorktreeIsReusedClean(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{
		"README.md": "hello\n", ".gitignore": "build/\n", "src/a.go": "package src\n", "src/old.go": "package src\n",
	})
	m := open(t, repo, nil)
	first := committedAttempt(t, m, "T1", map[string]string{"src/b.go": "package src // T1\n"})
	_, err := m.Integrate(ctx, first)
	require.NoError(t, err)
	// What the attempt leaves behind after its commit.
	write(t, first.Path, "build/out.bin", "artifact")
	write(t, first.Path, "scratch/notes.txt", "untracked")
	write(t, first.Path, "README.md", "edited, not committed\n")
	require.NoError(t, os.Remove(filepath.Join(first.Path, "src", "a.go")))
	require.NoError(t, os.Symlink(repo, filepath.Join(first.Path, "outside")))
	gitT(t, first.Path, "add", "README.md")
	gitDir := strings.TrimSpace(gitT(t, first.Path, "rev-parse", "--absolute-git-dir"))
	write(t, gitDir, "MERGE_HEAD", "junk\n")
	require.NoError(t, m.Remove(ctx, first))
	require.NoDirExists(t, first.Path)

	// main moves on before the next attempt.
	write(t, repo, "src/c.go", "package src // main\n")
	gitT(t, repo, "rm", "-q", "src/old.go")
	gitT(t, repo, "add", "-A")
	gitT(t, repo, "commit", "-q", "-m", "main moves")
	head := gitT(t, repo, "rev-parse", "main")

	next, err := m.Create(ctx, "r1", "T2", 1)
	require.NoError(t, err)
	require.Equal(t, head, next.Base)
	require.Equal(t, gitDir, strings.TrimSpace(gitT(t, next.Path, "rev-parse", "--absolute-git-dir")), "the parked worktree was reused")
	require.Equal(t, "refs/heads/"+next.Branch, gitT(t, next.Path, "symbolic-ref", "HEAD"))
	require.Equal(t, head, gitT(t, next.Path, "rev-parse", "HEAD"))
	require.Empty(t, gitT(t, next.Path, "status", "--porcelain", "--ignored", "--untracked-files=all"))
	require.Equal(t, snapshotFiles(t, repo), snapshotFiles(t, next.Path))
	require.NoFileExists(t, filepath.Join(gitDir, "MERGE_HEAD"))
	// Nothing leads back to the attempt before: "git checkout -" has no
	// previous commit to go to.
	out, err := exec.Command("git", "-C", next.Path, "rev-parse", "--verify", "-q", "@{-1}").CombinedOutput()
	require.Error(t, err, "@{-1} is %s", out)
	require.FileExists(t, filepath.Join(repo, "README.md"), "the symlink's target is untouched")

	// The reused worktree commits and integrates like a new one.
	write(t, next.Path, "src/d.go", "package src // T2\n")
	_, changed, err := m.Commit(ctx, next, "T2")
	require.NoError(t, err)
	require.True(t, changed)
	_, err = m.Integrate(ctx, next)
	require.NoError(t, err)
	require.Equal(t, []string{"r1/T2/1", "r1/T1/1"}, trailers(t, repo, "main")[:2])

	require.NoError(t, m.Remove(ctx, next))
	m.ReleaseIdle(ctx)
	require.Equal(t, 1, strings.Count(gitT(t, repo, "worktree", "list", "--porcelain"), "worktree "))
	entries, err := os.ReadDir(filepath.Join(repo, ".taskloom", "worktrees"))
	require.NoError(t, err)
	require.Empty(t, entries)
	require.Empty(t, gitT(t, repo, "for-each-ref", "refs/heads/taskloom/"))
}

// snapshotFiles maps every tracked-looking file under dir (outside .git
// and .taskloom) to its content.
func snapshotFiles(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	files := map[string]string{}
	require.NoError(tb, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		require.NoError(tb, err)
		rel, _ := filepath.Rel(dir, path)
		if rel == ".git" || rel == ".taskloom" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(path)
			require.NoError(tb, err)
			files[filepath.ToSlash(rel)] = string(data)
		}
		return nil
	}))
	return files
}

// Removing attempts leaves no empty folder under refs/heads or
// logs/refs/heads: git reads every folder there whenever it lists refs, so
// one left per task would make each later task slower.
func TestRemoveLeavesNoEmptyRefFolders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{"README.md": "hello\n"})
	m := open(t, repo, nil)
	for i, task := range []string{"T1", "T2", "T3"} {
		w := committedAttempt(t, m, task, map[string]string{task + ".txt": task})
		if i < 2 { // the last attempt is removed without being integrated
			_, err := m.Integrate(ctx, w)
			require.NoError(t, err)
		}
		require.NoError(t, m.Remove(ctx, w))
	}
	for _, dir := range []string{"refs/heads", "logs/refs/heads"} {
		var left []string
		root := filepath.Join(repo, ".git", filepath.FromSlash(dir))
		require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if rel != "." {
				left = append(left, filepath.ToSlash(rel))
			}
			return nil
		}))
		require.Equal(t, []string{"main"}, left, "what %s holds", dir)
	}
	require.Equal(t, "refs/taskloom/attempts/r1/T3/1", gitT(t, repo, "for-each-ref", "--format=%(refname)", "refs/taskloom/"))
}

// Ignored names what an attempt's folder holds beyond its commit: the
// files and folders git ignores, not the Include files copied in, nor an
// empty folder (git tracks none) or Python's bytecode cache.
func TestIgnoredAfterCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := setup(t, "repo", map[string]string{".gitignore": "*_gen.go\nbuild/\n.env\n__pycache__/\n", "a.go": "package a\n"})
	write(t, repo, ".env", "KEY=1\n")
	m := open(t, repo, &worktree.Opts{Include: []string{".env"}})
	w, err := m.Create(ctx, "r1", "T1", 1)
	require.NoError(t, err)
	ignored, err := m.Ignored(ctx, w)
	require.NoError(t, err)
	require.Empty(t, ignored, "a new worktree holds its commit and the Include files")

	write(t, w.Path, "b.go", "package a\n")
	write(t, w.Path, "c_gen.go", "package a\n")
	write(t, w.Path, "build/out/bin", "x")
	write(t, w.Path, "pkg/__pycache__/b.cpython-312.pyc", "x")
	require.NoError(t, os.MkdirAll(filepath.Join(w.Path, "out", "logs"), 0o755))
	_, changed, err := m.Commit(ctx, w, "T1: b")
	require.NoError(t, err)
	require.True(t, changed)
	ignored, err = m.Ignored(ctx, w)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"build", "c_gen.go"}, ignored)
}
