//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/creack/pty"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
)

// These tests run the taskloom binary under a real pseudo-terminal of 80
// columns, as a person at a terminal would.

// ptyScript is a scripted model for the two tasks of reviewProduct that
// both pass.
func ptyScript(t *testing.T) string {
	t.Helper()
	write := func(path, content string) map[string]any {
		return map[string]any{"tool_calls": []map[string]any{{"name": "write_to_file", "arguments": map[string]string{"path": path, "content": content}}}}
	}
	// The model thinks a while after writing: the live view shows it.
	done := map[string]any{"delay_ms": 400, "tool_calls": []map[string]any{{"name": "attempt_completion", "arguments": map[string]string{"result": "done"}}}}
	script := map[string]any{"conversations": []map[string]any{
		{"match": `Task: T1\b`, "replies": []any{write("notes/a/deeply/nested/folder/of/notes/notes.txt", "good notes\n"), done}},
		{"match": `Task: T2\b`, "replies": []any{write("log.txt", "good log\n"), done}},
	}}
	data, err := json.Marshal(script)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// ptySetup makes a repo with two tasks for two workers whose tests run
// verify (a shell command) and returns the repo and its PRODUCT.md.
func ptySetup(t *testing.T, verify string) (repo, product string) {
	t.Helper()
	return notesRepo(t, map[string]any{
		"max_attempts":       2,
		"parallel_workers":   2,
		"model":              "scripted:" + ptyScript(t),
		"verify":             map[string]any{"command": []string{"sh", "-c", verify}, "timeout": "2m"},
		"build_verification": map[string]any{"command": []string{}},
	}, strings.Replace(reviewProduct, "files_to_create: notes.txt", "files_to_create: notes/a/deeply/nested/folder/of/notes/notes.txt", 1))
}

// ptyBin is the taskloom binary these tests run under the terminal.
var ptyBin = testkit.Binary{Pkg: "github.com/taskloom/taskloom/cmd/taskloom"}

// ptyBinary builds taskloom once for these tests.
func ptyBinary(t *testing.T) string {
	t.Helper()
	return ptyBin.Path(t)
}

// ptyRun is taskloom running under a pseudo-terminal.
type ptyRun struct {
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func startPTY(t *testing.T, env []string, args ...string) *ptyRun {
	t.Helper()
	cmd := exec.Command(ptyBinary(t), args...)
	// A user's terminal, not CI's: the terminal library turns colour off
	// when CI is set.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CI=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "TERM=xterm-256color", "COLORTERM=")
	cmd.Env = append(cmd.Env, env...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 40})
	require.NoError(t, err)
	r := &ptyRun{cmd: cmd, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			r.mu.Lock()
			r.out.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = tty.Close()
	})
	return r
}

func (r *ptyRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitFor waits until the screen output matches re.
func (r *ptyRun) waitFor(t *testing.T, re *regexp.Regexp) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !re.MatchString(ansi.Strip(r.output())) {
		select {
		case <-deadline:
			t.Fatalf("no %s in 2 minutes; output:\n%s", re, ansi.Strip(r.output()))
		case <-tick.C:
		}
	}
}

// wait waits for the process to end and returns its exit code and its
// output.
func (r *ptyRun) wait(t *testing.T) (int, string) {
	t.Helper()
	err := r.cmd.Wait()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
	}
	return code, r.output()
}

// screenLines splits the terminal output into the lines it showed: at
// line ends, carriage returns and cursor moves, without escape codes.
func screenLines(raw string) []string {
	raw = regexp.MustCompile(`\x1b\[[0-9;?]*[A-HJKfl]`).ReplaceAllString(raw, "\n")
	return strings.FieldsFunc(ansi.Strip(raw), func(r rune) bool { return r == '\n' || r == '\r' })
}

var colourCode = regexp.MustCompile(`\x1b\[[0-9;]*(3[0-7]|38;[0-9;]+)m`)

func TestLiveViewUnderPTY(t *testing.T) {
	t.Parallel()
	for _, noColor := range []bool{false, true} {
		name := "colour"
		var env []string
		if noColor {
			name, env = "NO_COLOR", []string{"NO_COLOR=1"}
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo, product := ptySetup(t, "sleep 1; ! cat *.txt 2>/dev/null | grep -q bad")
			r := startPTY(t, env, "run", product, "--repo", repo)
			code, raw := r.wait(t)
			lines := screenLines(raw)
			require.Equal(t, 0, code, "output:\n%s", strings.Join(lines, "\n"))
			for _, l := range lines {
				require.LessOrEqual(t, ansi.StringWidth(l), 80, "wider than the terminal: %q", l)
			}
			text := strings.Join(lines, "\n")
			require.Regexp(t, `(?m)^W\s+TASK\s+ATT\s+TIME\s+ACTIVITY\s+TOKENS\s+COST`, text)
			// One row per worker, each with its task, attempt, elapsed
			// time and activity; a long path loses its middle.
			require.Regexp(t, `(?m)^1\s+T[12]\s+1\s+\d+:\d\d\s+\S`, text)
			require.Regexp(t, `(?m)^2\s+T[12]\s+1\s+\d+:\d\d\s+\S`, text)
			require.Regexp(t, `(?m)^\d\s+T[12]\s+1\s+\d+:\d\d\s+running tests\s`, text)
			require.Regexp(t, `(?m)^\d\s+T1\s+1\s+\d+:\d\d\s+write_to_file …/.*notes\.txt\s`, text)
			require.Regexp(t, `(?m)^\d/2 tasks done · `, text)
			require.Contains(t, text, "run ")
			require.Regexp(t, `(?m)^  T1  integrated \([0-9a-f]+\)$`, text)
			if noColor {
				require.NotRegexp(t, colourCode, raw, "NO_COLOR: no colour")
			} else {
				require.Regexp(t, colourCode, raw, "colour without NO_COLOR")
			}
		})
	}
}

func TestLiveViewCtrlCThenResume(t *testing.T) {
	t.Parallel()
	// The tests wait until the marker exists: Ctrl-C comes while they run.
	marker := filepath.Join(t.TempDir(), "go-on")
	repo, product := ptySetup(t, "while [ ! -f '"+marker+"' ]; do sleep 0.1; done; ! cat *.txt 2>/dev/null | grep -q bad")
	r := startPTY(t, nil, "run", product, "--repo", repo)
	r.waitFor(t, regexp.MustCompile(`running tests`))
	_, err := r.tty.Write([]byte{3}) // Ctrl-C
	require.NoError(t, err)
	code, raw := r.wait(t)
	lines := screenLines(raw)
	require.Equal(t, exitInterrupted, code, "output:\n%s", strings.Join(lines, "\n"))
	m := runIDPattern.FindStringSubmatch(strings.Join(lines, "\n"))
	require.NotNil(t, m, "no run ID in:\n%s", strings.Join(lines, "\n"))
	runID := m[1]
	last := strings.TrimSpace(lines[len(lines)-1])
	require.Equal(t, "taskloom resume "+runID+" --repo "+repo, last, "the last line is the resume command, which works from anywhere")

	code, out, errOut := reviewCLI(t, strings.NewReader(""), "status", runID, "--repo", repo, "--json")
	require.Equal(t, 0, code, errOut)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, nodes.RunInterrupted, st["status"])

	require.NoError(t, os.WriteFile(marker, nil, 0o644))
	code, out, errOut = reviewCLI(t, strings.NewReader(""), "resume", runID, "--repo", repo)
	require.Equal(t, 0, code, "resume\nstdout:\n%s\nstderr:\n%s", out, errOut)
	res := reviewState(t, repo, "", runID)
	for _, id := range []string{"T1", "T2"} {
		task := taskStatus(t, res, id)
		require.Equal(t, planner.StatusCompleted, task.Status)
		require.Zero(t, task.Attempts, "the attempt cut short does not count")
		_, again := res.State.Attempts.Get(id + "/2")
		require.False(t, again, "%s was not tried a second time", id)
	}
}

func TestSkipEndsPartial(t *testing.T) {
	t.Parallel()
	repo, product := reviewSetup(t, 1, "")
	runID := reviewRun(t, repo, product)
	code, out, errOut := reviewCLI(t, strings.NewReader(""), "review", runID, "--repo", repo, "--action", "skip", "--resume")
	require.Equal(t, exitPartial, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	require.Contains(t, out, "  T1  skipped\n")
	require.Regexp(t, `(?m)^  T2  integrated \([0-9a-f]+\)$`, out)
	require.Contains(t, out, "ended partial: 1 skipped, 0 blocked")
	code, out, errOut = reviewCLI(t, strings.NewReader(""), "status", runID, "--repo", repo, "--json")
	require.Equal(t, 0, code, errOut)
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Equal(t, nodes.RunPartial, st["status"])
}

func TestRunJSONEventStream(t *testing.T) {
	t.Parallel()
	repo, product := ptySetup(t, "! cat *.txt 2>/dev/null | grep -q bad")
	code, out, errOut := reviewCLI(t, strings.NewReader(""), "run", product, "--repo", repo, "--json")
	require.Equal(t, 0, code, "stderr:\n%s", errOut)
	fields := map[string][]string{
		"run_started":     {"target_branch", "workers"},
		"plan_ready":      {"tasks", "warnings"},
		"task_started":    {"task_id", "attempt", "worker"},
		"worker_activity": {"task_id", "attempt", "tool", "summary"},
		"provider_wait":   {"reason", "seconds"},
		"task_verified":   {"task_id", "attempt", "passed", "error"},
		"task_integrated": {"task_id", "attempt", "commit"},
		"task_escalated":  {"task_id", "reason"},
		"usage":           {"usage"},
		"run_finished":    {"status", "exit_code"},
	}
	seen := map[string]int{}
	var runID string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &ev), "not JSON: %s", line)
		typ, _ := ev["type"].(string)
		want, ok := fields[typ]
		require.True(t, ok, "unknown type: %s", line)
		require.Len(t, ev, 3+len(want), "fields of %s", line)
		for _, k := range append([]string{"ts", "run_id"}, want...) {
			require.Contains(t, ev, k, line)
		}
		_, err := time.Parse(time.RFC3339Nano, ev["ts"].(string))
		require.NoError(t, err)
		if runID == "" {
			runID = ev["run_id"].(string)
			require.Equal(t, "run_started", typ, "the first event")
			require.Equal(t, "main", ev["target_branch"])
			require.EqualValues(t, 2, ev["workers"])
		}
		require.Equal(t, runID, ev["run_id"])
		seen[typ]++
	}
	require.Equal(t, 1, seen["plan_ready"])
	require.Equal(t, 2, seen["task_started"])
	require.Equal(t, 2, seen["task_verified"])
	require.Equal(t, 2, seen["task_integrated"])
	require.Positive(t, seen["worker_activity"])
	require.Equal(t, 1, seen["run_finished"])
	require.Contains(t, out, `"type":"run_finished"`)
	last := strings.TrimSpace(out)[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	require.Contains(t, last, `"status":"completed"`)
	require.Contains(t, last, `"exit_code":0`)
}
