package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/review"
	"github.com/taskloom/taskloom/internal/session"
)

// These tests are about the user's branch: a run integrates into the branch
// it started on and nowhere else, never silently redoes or undoes what the
// user did to it, and is the only live run on it. They set session.PointFunc, so
// they never run in parallel.

// taskloomCtx runs the CLI in process with ctx.
func taskloomCtx(ctx context.Context, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Execute(ctx, args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// atPoints calls fn at the pipeline's named points (with the how-many-th
// passage of that point) for the rest of the test.
func atPoints(t *testing.T, fn func(point string, n int)) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	session.PointFunc = func(point string) {
		mu.Lock()
		seen[point]++
		n := seen[point]
		mu.Unlock()
		fn(point, n)
	}
	t.Cleanup(func() { session.PointFunc = nil })
}

func headOf(t *testing.T, dir, ref string) string {
	t.Helper()
	return strings.TrimSpace(git(t, dir, "rev-parse", ref))
}

func statusTargetBranch(t *testing.T, dir, id string, db []string) string {
	t.Helper()
	code, out, errOut := taskloom(t, append([]string{"status", id, "--repo", dir, "--json"}, db...)...)
	require.Equal(t, exitOK, code, errOut)
	var st struct {
		TargetBranch string `json:"target_branch"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	return st.TargetBranch
}

// A run stopped mid-way and resumed while the user has another branch
// checked out integrates into the branch it started on; the checked-out
// branch is left alone.
func TestE2EResumeIntegratesIntoRecordedBranch(t *testing.T) {
	skipShort(t)
	forEachStore(t, func(t *testing.T, db []string) {
		dir := exampleRepo(t, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		atPoints(t, func(point string, n int) {
			if point == "select:start" && n == 2 {
				cancel() // as Ctrl-C would, after the first batch
			}
		})
		code, stdout, stderr := taskloomCtx(ctx, append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, db...)...)
		require.NotEqual(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		id := runID(t, stdout)
		session.PointFunc = nil
		require.Equal(t, "main", statusTargetBranch(t, dir, id, db))

		git(t, dir, "checkout", "-q", "-b", "other")
		other := headOf(t, dir, "other")
		code, stdout, stderr = taskloom(t, append([]string{"resume", id, "--repo", dir}, db...)...)
		require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)

		require.Equal(t, "other", strings.TrimSpace(git(t, dir, "rev-parse", "--abbrev-ref", "HEAD")), "the user's checkout is untouched")
		require.Equal(t, other, headOf(t, dir, "other"), "nothing was integrated into the checked-out branch")
		tr := trailers(t, dir)
		require.Equal(t, []string{"T1", "T2", "T3-a", "T3-b", "T4"}, sortedKeys(tr), "every task is on main")
		for task, seqs := range tr {
			require.Len(t, seqs, 1, "task %s integrated once", task)
		}
		require.Equal(t, "main", statusTargetBranch(t, dir, id, db))
	})
}

// The user commits on main while a run goes on, an attempt starts from
// that commit, the run stops, and the user drops the commit again with git
// reset --hard HEAD~1. The resumed run must not bring the dropped commit
// back (folding it into the attempt's commit did): it stops naming both
// heads, stays stopped on a plain resume, and with --accept-head redoes the
// attempt on the branch as the user left it.
func TestE2EMidRunResetIsNotUndone(t *testing.T) {
	skipShort(t)
	forEachStore(t, func(t *testing.T, db []string) {
		dir := exampleRepo(t, func(c map[string]any) { c["parallel_workers"] = 1 }, nil)
		start := headOf(t, dir, "main")
		var user string
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		atPoints(t, func(point string, n int) {
			switch {
			case point == "select:start" && n == 1:
				require.NoError(t, os.WriteFile(filepath.Join(dir, "user.txt"), []byte("the user's change\n"), 0o644))
				git(t, dir, "add", "user.txt")
				git(t, dir, "commit", "-q", "-m", "user change")
				user = headOf(t, dir, "main")
			case point == "implement:before_worker" && n == 1:
				cancel() // T1's worktree starts from the user's commit
			}
		})
		code, stdout, stderr := taskloomCtx(ctx, append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, db...)...)
		require.NotEqual(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		session.PointFunc = nil
		id := runID(t, stdout)
		git(t, dir, "reset", "-q", "--hard", "HEAD~1")
		require.Equal(t, start, headOf(t, dir, "main"))

		resume := append([]string{"resume", id, "--repo", dir}, db...)
		code, stdout, stderr = taskloom(t, resume...)
		require.Equal(t, exitError, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		// The command it suggests finds the store the resume was given.
		flags := " --repo " + review.ShellQuote(dir)
		if len(db) > 0 {
			flags += " --db " + review.ShellQuote(db[1])
		}
		want := fmt.Sprintf("taskloom: main was reset or rewritten under run %s: it was at %s, now at %s; restore it, or run \"taskloom resume %s%s --accept-head\"\n",
			id, user[:7], start[:7], id, flags)
		require.Equal(t, want, stderr)
		require.Equal(t, start, headOf(t, dir, "main"), "main stays where the user put it")
		require.NoFileExists(t, filepath.Join(dir, "user.txt"))

		// Another plain resume refuses the same way.
		code, stdout, stderr = taskloom(t, resume...)
		require.Equal(t, exitError, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		require.Equal(t, want, stderr)
		require.Equal(t, start, headOf(t, dir, "main"))

		code, stdout, stderr = taskloom(t, append(resume, "--accept-head")...)
		require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		out, err := exec.Command("git", "-C", dir, "log", "--format=%H", "main").Output()
		require.NoError(t, err)
		require.NotContains(t, string(out), user, "the dropped commit is not back on main")
		require.Error(t, exec.Command("git", "-C", dir, "cat-file", "-e", "main:user.txt").Run(), "user.txt is not on main")
		tr := trailers(t, dir)
		require.Equal(t, []string{"T1", "T2", "T3-a", "T3-b", "T4"}, sortedKeys(tr))
		for task, seqs := range tr {
			require.Len(t, seqs, 1, "task %s integrated once", task)
		}
		require.Equal(t, []string{"2"}, tr["T1"], "T1's first try, built on the dropped commit, was dropped")
		goTestPasses(t, dir)
		noWorktreesLeft(t, dir)
	})
}

// A second run on a repo and branch where a run is live exits 1 naming the
// live run, and leaves it alone.
func TestE2EOneLiveRunPerBranch(t *testing.T) {
	skipShort(t)
	forEachStore(t, func(t *testing.T, db []string) {
		dir := exampleRepo(t, nil, nil)
		live, release := make(chan struct{}), make(chan struct{})
		atPoints(t, func(point string, n int) {
			if point == "select:start" && n == 1 {
				close(live)
				<-release
			}
		})
		args := append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, db...)
		type result struct {
			code           int
			stdout, stderr string
		}
		first := make(chan result, 1)
		go func() {
			code, stdout, stderr := taskloomCtx(context.Background(), args...)
			first <- result{code, stdout, stderr}
		}()
		select {
		case <-live:
		case r := <-first:
			t.Fatalf("the first run ended before it selected a task: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}

		code, stdout, stderr := taskloom(t, args...)
		close(release)
		r := <-first
		require.Equal(t, exitOK, r.code, "first run: stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		id := runID(t, r.stdout)
		require.Equal(t, exitError, code, "second run: stdout:\n%s\nstderr:\n%s", stdout, stderr)
		host, err := os.Hostname()
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("taskloom: run %s is live on main (pid %d, host %s): wait for it or stop it\n", id, os.Getpid(), host), stderr)

		// The second run left no record: runs lists the first alone.
		code, out, errOut := taskloom(t, append([]string{"runs", "--repo", dir, "--json"}, db...)...)
		require.Equal(t, exitOK, code, errOut)
		var rows []struct {
			RunID string `json:"run_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rows))
		require.Len(t, rows, 1)
		require.Equal(t, id, rows[0].RunID)
	})
}

// listAll lists every path under dir, relative to it.
func listAll(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel != "." && !strings.HasPrefix(rel, ".git"+string(filepath.Separator)) {
			paths = append(paths, rel)
		}
		return nil
	}))
	return paths
}

// Read-only commands in a repo without runs, and every repo command outside
// a git repo, create nothing and say what is wrong in one line.
func TestE2EReadOnlyCommandsCreateNothing(t *testing.T) {
	t.Parallel()
	tasks, err := filepath.Abs(filepath.Join("testdata", "plan", "tasks.json"))
	require.NoError(t, err)

	t.Run("empty_repo", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		git(t, dir, "init", "-q", "-b", "main")
		before := listAll(t, dir)
		noRuns := fmt.Sprintf("no taskloom runs yet in %s: start one with taskloom run PRODUCT.md\n", dir)
		for _, c := range []struct {
			args   []string
			code   int
			stdout string
			stderr string
		}{
			{args: []string{"status"}, code: exitError, stderr: "taskloom: " + noRuns},
			{args: []string{"status", "--json"}, code: exitError, stderr: "taskloom: " + noRuns},
			{args: []string{"runs"}, code: exitOK, stdout: noRuns},
			{args: []string{"runs", "--json"}, code: exitOK, stdout: "[]\n"},
			{args: []string{"history", "r1"}, code: exitError, stderr: "taskloom: " + noRuns},
		} {
			code, stdout, stderr := taskloom(t, append(c.args, "--repo", dir)...)
			require.Equal(t, c.code, code, "%v: stdout %q stderr %q", c.args, stdout, stderr)
			require.Equal(t, c.stdout, stdout, "%v", c.args)
			require.Equal(t, c.stderr, stderr, "%v", c.args)
		}
		code, stdout, stderr := taskloom(t, "plan", "--tasks", tasks, "--repo", dir)
		require.Equal(t, exitOK, code, "plan: %s%s", stdout, stderr)
		require.Equal(t, before, listAll(t, dir), "the read-only commands created files")
		require.NoDirExists(t, filepath.Join(dir, ".taskloom"))
	})

	t.Run("not_a_repo", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "PRODUCT.md"), []byte("# Product\n"), 0o644))
		notRepo := fmt.Sprintf("taskloom: %s is not inside a git repository: cd into your repo or pass --repo\n", dir)
		for _, args := range [][]string{
			{"status"}, {"status", "r1", "--json"}, {"runs"}, {"history", "r1"},
			{"run", filepath.Join(dir, "PRODUCT.md")}, {"resume", "r1"}, {"review", "r1", "--task", "T1", "--action", "skip"},
		} {
			code, stdout, stderr := taskloom(t, append(args, "--repo", dir)...)
			require.Equal(t, exitError, code, "%v: stdout %q stderr %q", args, stdout, stderr)
			require.Equal(t, notRepo, stderr, "%v", args)
		}
		require.Equal(t, []string{"PRODUCT.md"}, listAll(t, dir), "commands outside a repo created files")
	})
}

// A review decision recorded before main was reset is applied by resume
// --accept-head, not dropped with the review step it answered.
func TestE2EAcceptHeadKeepsReviewDecisions(t *testing.T) {
	skipShort(t)
	forEachStore(t, func(t *testing.T, db []string) {
		dir := commandRepo(t, func(c map[string]any) {
			c["max_attempts"] = 1
			c["parallel_workers"] = 1
			// T1 fails its tests whatever it does.
			c["verify"] = map[string]any{"command": []string{"sh", "-c", "test ! -e T1.txt"}}
		})
		code, stdout, stderr := taskloom(t, append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, db...)...)
		require.Equal(t, exitReview, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		id := runID(t, stdout)
		git(t, dir, "reset", "-q", "--hard", "HEAD~1")

		code, stdout, stderr = taskloom(t, append([]string{"review", id, "--repo", dir, "--task", "T1", "--action", "skip"}, db...)...)
		require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		resume := append([]string{"resume", id, "--repo", dir}, db...)
		code, _, stderr = taskloom(t, resume...)
		require.Equal(t, exitError, code, stderr)
		require.Contains(t, stderr, "--accept-head")

		code, stdout, stderr = taskloom(t, append(resume, "--accept-head")...)
		require.Equal(t, exitPartial, code, "the skip is applied\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
		code, stdout, _ = taskloom(t, append([]string{"status", id, "--repo", dir, "--json"}, db...)...)
		require.Equal(t, exitOK, code)
		st := statusJSON(t, stdout)
		require.Equal(t, "partial", st["status"])
		require.Equal(t, 1.0, st["tasks"].(map[string]any)["skipped"])
		require.Equal(t, 3.0, st["tasks"].(map[string]any)["completed"])
		// Its milestone is done with, and says what was left out.
		code, stdout, _ = taskloom(t, append([]string{"status", id, "--repo", dir}, db...)...)
		require.Equal(t, exitOK, code)
		require.Regexp(t, `(?m)^  M1\s+completed \(1 skipped\)\s`, stdout)
	})
}
