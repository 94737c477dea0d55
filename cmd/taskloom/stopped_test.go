package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/runview"
)

// A step that fails for a reason outside the tasks (here a build command
// that cannot start) stops the run in one line that says how to go on; the
// run is interrupted, not failed, and resume finishes it once the cause is
// fixed.
func TestStepErrorStopsTheRunResumably(t *testing.T) {
	testStepErrorStops(t, false)
}

// A run started with --config goes on with that file when resumed, from
// wherever: the resume command takes no --config.
func TestResumeKeepsTheRunsConfigFile(t *testing.T) {
	testStepErrorStops(t, true)
}

// setBuild sets build_verification.command in the config file at path.
func setBuild(t *testing.T, path string, argv ...string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var c map[string]any
	require.NoError(t, json.Unmarshal(data, &c))
	c["build_verification"] = map[string]any{"command": argv}
	data, err = json.Marshal(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

func testStepErrorStops(t *testing.T, configFlag bool) {
	dir := commandRepo(t, nil)
	cfgPath := filepath.Join(dir, ".project-config.json")
	var args []string
	if configFlag {
		// The config is a file of the user's, outside the repo.
		outside := filepath.Join(t.TempDir(), "taskloom.json")
		require.NoError(t, os.Rename(cfgPath, outside))
		cfgPath, args = outside, []string{"--config", outside}
	}
	git(t, dir, "rm", "-q", "--cached", ".project-config.json")
	git(t, dir, "commit", "-q", "-m", "the config stays out of git")
	setBuild(t, cfgPath, filepath.Join(dir, "no-such-build-tool"))

	code, stdout, stderr := taskloom(t, append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, args...)...)
	require.Equal(t, exitError, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	id := runID(t, stdout)
	require.Contains(t, stdout, "stopped by the error below; once it is fixed, resume with:\n", "no attempt was cut short")
	require.NotContains(t, stdout, "cut short")
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line:\n%s", stderr)
	require.Regexp(t, `^taskloom: run `+id+` stopped: .*no-such-build-tool.*; once that is fixed, resume it with: taskloom resume `+id+` --repo \S+\n$`, stderr)
	_, out, _ := taskloom(t, "runs", "--repo", dir)
	require.Contains(t, out, "interrupted")
	require.NotContains(t, out, "failed")

	setBuild(t, cfgPath, "true")
	code, stdout, stderr = taskloom(t, "resume", id, "--repo", dir)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	eachIntegratedOnce(t, dir)
}

// The commands on a run in a store given with --db work from outside the
// run's repo, as the commands printed for pasting must: the run's record
// names its repo.
func TestRunCommandsWithADBWorkFromAnywhere(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\ncase \"$1\" in T1) echo broken >&2; exit 1;; esac\necho \"done by $1\" > \"$1.txt\"\n"), 0o755))
	dir := commandRepo(t, func(c map[string]any) {
		c["max_attempts"] = 1
		c["worker"] = map[string]any{"kind": "command", "command": []string{agent, "{task_id}"}}
	})
	db := filepath.Join(t.TempDir(), "runs.db")

	code, stdout, stderr := taskloom(t, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir, "--db", db)
	require.Equal(t, exitReview, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	id := runID(t, stdout)
	elsewhere := t.TempDir() // not a git repo
	code, stdout, stderr = taskloom(t, "review", id, "--repo", elsewhere, "--db", db, "--action", "skip")
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	code, stdout, stderr = taskloom(t, "resume", id, "--repo", elsewhere, "--db", db)
	require.Equal(t, exitPartial, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
}

// With --json, stdout holds only events: a run stopped by Ctrl-C gives
// the command that resumes it on stderr, with exit code 130.
func TestStoppedJSONRunNamesTheResumeCommand(t *testing.T) {
	var out strings.Builder
	view := runview.New(&out, runview.Opts{RunID: "R1", JSON: true})
	err := finishRun(session.Outcome{RunID: "R1", View: view}, fmt.Errorf("step 3: %w", context.Canceled), " --repo /r", true)
	var ec *exitCodeError
	require.ErrorAs(t, err, &ec)
	require.Equal(t, exitInterrupted, ec.code)
	require.Equal(t, "stopped; resume with: taskloom resume R1 --repo /r", err.Error())
	require.Contains(t, out.String(), `"type":"run_finished"`)
	require.NotContains(t, out.String(), "taskloom resume", "stdout stays JSON")

	err = finishRun(session.Outcome{RunID: "R1", View: runview.New(&out, runview.Opts{RunID: "R1"})}, context.Canceled, "", false)
	require.ErrorAs(t, err, &ec)
	require.Empty(t, err.Error(), "the text summary printed the command already")
}

// A run stopped (Ctrl-C, SIGTERM) just after a task's attempt was
// integrated, before the step that did it was recorded, says in its summary
// that the task is on the branch, not that it is not done; resume records
// it without integrating it twice.
func TestStoppedAfterIntegratingSaysSo(t *testing.T) {
	skipShort(t)
	dir := commandRepo(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	atPoint(t, "integrate:after", 1, cancel)
	var stdout, stderr strings.Builder
	code := Execute(ctx, []string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, strings.NewReader(""), &stdout, &stderr)
	require.Equal(t, exitInterrupted, code, "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	id := runID(t, stdout.String())
	tr := trailers(t, dir)
	require.Len(t, tr, 1, "one task was integrated before the stop")
	var task string
	for task = range tr {
	}
	sha := headOf(t, dir, "main")
	require.Regexp(t, `(?m)^  `+task+`\s+integrated \(`+sha[:10]+`\) as the run stopped; resume records it$`, stdout.String())
	require.Regexp(t, `(?m)^run `+id+`: interrupted \(.*: 0 of \d+ tasks completed\)$`, stdout.String(), "the count is what is recorded")

	session.PointFunc = nil
	code, out, errOut := taskloom(t, "resume", id, "--repo", dir)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Regexp(t, `(?m)^  `+task+`\s+integrated \(`+sha[:10]+`\)$`, out)
	eachIntegratedOnce(t, dir)
}
