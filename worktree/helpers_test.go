package worktree_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/worktree"
)

// gitT runs git in dir with a test identity and returns its trimmed
// output.
func gitT(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	return strings.TrimSpace(testkit.Git(tb, dir, args...))
}

func write(tb testing.TB, dir, rel, content string) {
	tb.Helper()
	testkit.WriteFiles(tb, dir, map[string]string{rel: content})
}

func read(tb testing.TB, dir, rel string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	require.NoError(tb, err)
	return string(data)
}

// setup makes a repository in a fresh folder named name with files
// committed on main, and returns its path.
func setup(tb testing.TB, name string, files map[string]string) string {
	tb.Helper()
	repo := filepath.Join(tb.TempDir(), name)
	require.NoError(tb, os.MkdirAll(repo, 0o755))
	gitT(tb, repo, "init", "-q", "-b", "main")
	gitT(tb, repo, "config", "gc.auto", "0")
	for rel, content := range files {
		write(tb, repo, rel, content)
	}
	gitT(tb, repo, "add", "-A")
	gitT(tb, repo, "commit", "-q", "-m", "initial")
	return repo
}

func open(tb testing.TB, repo string, opts *worktree.Opts) *worktree.Manager {
	tb.Helper()
	m, err := worktree.Open(context.Background(), repo, opts)
	require.NoError(tb, err)
	return m
}

// committedAttempt creates attempt 1 of task in run r1, writes files in
// its worktree and commits them with the task's ID as the message.
func committedAttempt(tb testing.TB, m *worktree.Manager, task string, files map[string]string) *worktree.Worktree {
	tb.Helper()
	ctx := context.Background()
	w, err := m.Create(ctx, "r1", task, 1)
	require.NoError(tb, err)
	testkit.WriteFiles(tb, w.Path, files)
	_, _, err = m.Commit(ctx, w, task)
	require.NoError(tb, err)
	return w
}

// snapshot is a checkout's state: the ref it has checked out, its HEAD, its
// index, its status and every file outside .git and .taskloom, byte for
// byte.
func snapshot(tb testing.TB, dir string) map[string]string {
	tb.Helper()
	snap := map[string]string{
		"@HEAD":   gitT(tb, dir, "rev-parse", "HEAD"),
		"@ref":    gitT(tb, dir, "symbolic-ref", "-q", "HEAD"),
		"@index":  gitT(tb, dir, "ls-files", "-s"),
		"@status": gitT(tb, dir, "status", "--porcelain", "--untracked-files=all"),
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && (rel == ".git" || rel == ".taskloom") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			snap[filepath.ToSlash(rel)] = string(data)
		}
		return nil
	})
	require.NoError(tb, err)
	return snap
}

// trailers lists the Taskloom-Task trailers in ref's history, newest first.
func trailers(tb testing.TB, repo, ref string) []string {
	tb.Helper()
	out := gitT(tb, repo, "log", "--format=%(trailers:key=Taskloom-Task,valueonly,separator=%x2C)", ref)
	var list []string
	for line := range strings.SplitSeq(out, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			list = append(list, line)
		}
	}
	return list
}

// committedFiles lists the files a commit changed.
func committedFiles(tb testing.TB, repo, commit string) []string {
	tb.Helper()
	out := gitT(tb, repo, "-c", "core.quotePath=false", "show", "--format=", "--name-only", commit)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}
