package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
)

// TestRunRefusesABadTaskList: run reads an explicit task list before it
// records anything, so a list that cannot be read is one line naming the
// file's line, exit 1, and leaves no run behind.
func TestRunRefusesABadTaskList(t *testing.T) {
	product := "# P\n\n## Milestone M1: Core\n\n### Task T1: A\n- acceptance_criteria: a\n- files_to_create: a.go\n- prio: x\n"
	repo := testkit.Repo(t, map[string]string{"bad.md": product})
	code, out, errOut := taskloom(t, "run", filepath.Join(repo, "bad.md"), "--repo", repo)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Equal(t, 1, strings.Count(errOut, "\n"), "one line:\n%s", errOut)
	require.Regexp(t, `^taskloom: \S*bad\.md:8: unknown key "prio" in task T1`, errOut)
	require.NotContains(t, errOut, "task_breakdown")

	code, out, errOut = taskloom(t, "runs", "--repo", repo)
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	require.NotContains(t, out, "bad.md", "no run was recorded")
}

// TestRunWorkersOutOfRange: a --workers value below 0 is a usage error
// (exit 2), like a value that is not a number.
func TestRunWorkersOutOfRange(t *testing.T) {
	repo := testkit.Repo(t, map[string]string{"PRODUCT.md": "# P\n"})
	code, _, errOut := taskloom(t, "run", filepath.Join(repo, "PRODUCT.md"), "--repo", repo, "--workers", "-1")
	require.Equal(t, exitUsage, code, errOut)
	require.Equal(t, "taskloom: --workers must be at least 0, got -1\n", errOut)
}

func TestResumeFromANegativeCheckpoint(t *testing.T) {
	repo := testkit.Repo(t, map[string]string{"README.md": "# r\n"})
	for _, from := range []string{"-1", "x"} {
		code, _, errOut := taskloom(t, "resume", "r1", "--from", from, "--repo", repo)
		require.Equal(t, exitUsage, code, errOut)
		require.Equal(t, "taskloom: --from \""+from+"\": want a checkpoint step number from taskloom history\n", errOut)
	}
}

// TestRunRefusesAnEmptyProduct: an empty PRODUCT.md is said to be empty,
// before a run is recorded and whatever the model.
func TestRunRefusesAnEmptyProduct(t *testing.T) {
	repo := testkit.Repo(t, map[string]string{"PRODUCT.md": "\n\n"})
	code, _, errOut := taskloom(t, "run", filepath.Join(repo, "PRODUCT.md"), "--repo", repo)
	require.Equal(t, 1, code, errOut)
	require.Regexp(t, `^taskloom: \S*PRODUCT\.md is empty: write the product spec in it, or a task list .+\n$`, errOut)
	require.NoDirExists(t, filepath.Join(repo, ".taskloom"), "no store is made for it")
	code, _, errOut = taskloom(t, "plan", filepath.Join(repo, "PRODUCT.md"), "--repo", repo)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "PRODUCT.md is empty")
	code, out, _ := taskloom(t, "runs", "--repo", repo)
	require.Equal(t, 0, code)
	require.Contains(t, out, "no taskloom runs yet in ")
}
