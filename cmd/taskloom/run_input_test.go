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
