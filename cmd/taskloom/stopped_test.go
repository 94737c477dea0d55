package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A step that fails for a reason outside the tasks (here a build command
// that cannot start) stops the run in one line that says how to go on; the
// run is interrupted, not failed, and resume finishes it once the cause is
// fixed.
func TestStepErrorStopsTheRunResumably(t *testing.T) {
	t.Parallel()
	testStepErrorStops(t, false)
}

// A run started with --config goes on with that file when resumed, from
// wherever: the resume command takes no --config.
func TestResumeKeepsTheRunsConfigFile(t *testing.T) {
	t.Parallel()
	testStepErrorStops(t, true)
}

func testStepErrorStops(t *testing.T, configFlag bool) {
	dir := t.TempDir()
	agent := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\necho \"done by $1\" > \"$1.txt\"\necho '{\"type\":\"result\",\"result\":\"done\"}'\n"), 0o755))
	cfgPath := filepath.Join(dir, ".project-config.json")
	var args []string
	if configFlag {
		cfgPath = filepath.Join(t.TempDir(), "taskloom.json")
		args = []string{"--config", cfgPath}
	}
	config := func(build string) {
		cfg, err := json.Marshal(map[string]any{
			"verify":             map[string]any{"command": []string{"true"}},
			"build_verification": map[string]any{"command": []string{build}},
			"worker":             map[string]any{"kind": "command", "command": []string{agent, "{task_id}"}},
		})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(cfgPath, cfg, 0o644))
	}
	config(filepath.Join(dir, "no-such-build-tool"))
	product := filepath.Join(dir, "PRODUCT.md")
	require.NoError(t, os.WriteFile(product, []byte("# p\n\n## Milestone M1: One\n\n### Task T1: Write T1.txt\n- acceptance_criteria: T1.txt exists\n- files_to_create: T1.txt\n"), 0o644))
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "p")
	if !configFlag {
		git(t, dir, "rm", "-q", "--cached", ".project-config.json")
		git(t, dir, "commit", "-q", "-m", "config stays local")
	}

	code, stdout, stderr := taskloom(t, append([]string{"run", product, "--repo", dir}, args...)...)
	require.Equal(t, exitError, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	id := runID(t, stdout)
	require.Contains(t, stdout, "stopped by the error below; once it is fixed, resume with:\n", "no attempt was cut short")
	require.NotContains(t, stdout, "cut short")
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line:\n%s", stderr)
	require.Regexp(t, `^taskloom: run `+id+` stopped: .*no-such-build-tool.*; once that is fixed, resume it with: taskloom resume `+id+` --repo \S+\n$`, stderr)
	_, out, _ := taskloom(t, "runs", "--repo", dir)
	require.Contains(t, out, "interrupted")
	require.NotContains(t, out, "failed")

	config("true")
	code, stdout, stderr = taskloom(t, "resume", id, "--repo", dir)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
}

// The commands on a run in a store given with --db work from outside the
// run's repo, as the commands printed for pasting must: the run's record
// names its repo.
func TestRunCommandsWithADBWorkFromAnywhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	agent := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\necho broken >&2\nexit 1\n"), 0o755))
	cfg, err := json.Marshal(map[string]any{
		"max_attempts":       1,
		"verify":             map[string]any{"command": []string{"true"}},
		"build_verification": map[string]any{"command": []string{"true"}},
		"worker":             map[string]any{"kind": "command", "command": []string{agent, "{task_id}"}},
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".project-config.json"), cfg, 0o644))
	product := filepath.Join(dir, "PRODUCT.md")
	require.NoError(t, os.WriteFile(product, []byte("# p\n\n## Milestone M1: One\n\n### Task T1: Write T1.txt\n- acceptance_criteria: T1.txt exists\n- files_to_create: T1.txt\n"), 0o644))
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "p")
	db := filepath.Join(t.TempDir(), "runs.db")

	code, stdout, stderr := taskloom(t, "run", product, "--repo", dir, "--db", db)
	require.Equal(t, exitReview, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	id := runID(t, stdout)
	elsewhere := t.TempDir() // not a git repo
	code, stdout, stderr = taskloom(t, "review", id, "--repo", elsewhere, "--db", db, "--action", "skip")
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	code, stdout, stderr = taskloom(t, "resume", id, "--repo", elsewhere, "--db", db)
	require.Equal(t, exitPartial, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
}
