//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanWarnsAgainstRepo: plan and run, in a repo, warn about a task
// that creates a file the repo has, naming the PRODUCT.md line; the run's
// plan_ready event carries the warning.
func TestPlanWarnsAgainstRepo(t *testing.T) {
	skipShort(t) // commandRepo sets the environment: not parallel
	dir := commandRepo(t, nil)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "T1.txt"), []byte("old\n"), 0o644))
	git(t, dir, "add", "T1.txt")
	git(t, dir, "commit", "-q", "-m", "T1.txt exists")
	product := filepath.Join(dir, "PRODUCT.md")
	want := product + ":8: T1 creates T1.txt, which already exists in the repository; list it in files_to_modify"

	code, stdout, stderr := taskloom(t, "plan", product, "--repo", dir)
	require.Equal(t, 0, code, "plan\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stdout, want)
	require.NotContains(t, stdout, "T2 creates", "T2.txt does not exist")

	code, stdout, stderr = taskloom(t, "run", product, "--repo", dir, "--json")
	require.Equal(t, 0, code, "run\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	found := false
	for _, line := range strings.Split(stdout, "\n") {
		var ev struct {
			Type     string   `json:"type"`
			Warnings []string `json:"warnings"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "plan_ready" {
			found = true
			require.Contains(t, ev.Warnings, want)
		}
	}
	require.True(t, found, "no plan_ready event:\n%s", stdout)
}

// TestTaskSizeLimitsSteerThePlan: task_size_limits in .project-config.json
// decides how many tasks `plan` makes of a large one, and which warnings it
// gets.
func TestTaskSizeLimitsSteerThePlan(t *testing.T) {
	t.Parallel()
	var files []string
	for i := range 10 {
		files = append(files, fmt.Sprintf("pkg%d/f%d.go", i/2, i))
	}
	raw, err := json.Marshal(map[string]any{
		"milestones": []map[string]any{{"id": "M1", "name": "One"}},
		"tasks": []map[string]any{{"id": "T1", "title": "Big", "milestone_id": "M1", "user_story": "As a user I want it",
			"acceptance_criteria": []string{"pkg0 works", "pkg1 works", "pkg2 works", "pkg3 works", "pkg4 works"},
			"files_to_create":     files}},
	})
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		limits  map[string]any
		tasks   func(n int) bool
		warning string
	}{
		{"default threshold splits", map[string]any{}, func(n int) bool { return n >= 2 }, ""},
		{"high threshold keeps it whole", map[string]any{"complexity_threshold": 13}, func(n int) bool { return n == 1 }, ""},
		{"auto_split off warns", map[string]any{"auto_split": false}, func(n int) bool { return n == 1 }, "is above complexity_threshold 5 and auto_split is off"},
		{"criteria limit warns", map[string]any{"complexity_threshold": 13, "max_criteria_per_task": 2}, func(n int) bool { return n == 1 },
			"T1: 5 acceptance criteria, above max_criteria_per_task (2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg, err := json.Marshal(map[string]any{"task_size_limits": tc.limits})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, ".project-config.json"), cfg, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "raw.json"), raw, 0o644))
			code, stdout, stderr := taskloom(t, "plan", "--tasks", filepath.Join(dir, "raw.json"), "--repo", dir, "--json")
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			var p struct {
				Tasks    []struct{ ID string } `json:"tasks"`
				Warnings []string              `json:"warnings"`
			}
			require.NoError(t, json.Unmarshal([]byte(stdout), &p))
			require.True(t, tc.tasks(len(p.Tasks)), "%d tasks", len(p.Tasks))
			if tc.warning != "" {
				require.Contains(t, strings.Join(p.Warnings, "\n"), tc.warning)
			}
		})
	}
}
