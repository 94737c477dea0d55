package ui_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
)

// browserInstall is how to get what the browser test needs.
const browserInstall = "apt-get install chromium && npm install --prefix ~/.cache/taskloom-test-js playwright-core"

// browserTools returns chromium and playwright-core's folder. Without them
// the test skips, or fails under CI=true.
func browserTools(t *testing.T) (chromium, playwright string) {
	t.Helper()
	chromium = os.Getenv("TASKLOOM_TEST_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	js := os.Getenv("TASKLOOM_TEST_JS_RUNNERS")
	if js == "" {
		home, _ := os.UserHomeDir()
		js = filepath.Join(home, ".cache", "taskloom-test-js")
	}
	playwright = filepath.Join(js, "node_modules", "playwright-core")
	_, nodeErr := exec.LookPath("node")
	_, chromeErr := os.Stat(chromium)
	_, pwErr := os.Stat(filepath.Join(playwright, "package.json"))
	if nodeErr != nil || chromeErr != nil || pwErr != nil {
		msg := "browser test needs node, " + chromium + " and " + playwright + ": " + browserInstall
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return chromium, playwright
}

// artifacts is where the test keeps what CI should keep: $TASKLOOM_ARTIFACTS,
// or artifacts/ at the module's root.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TASKLOOM_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts")
	}
	dir, err := filepath.Abs(dir)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// liveRepo makes a repo whose run keeps 3 workers busy for a while: T1, T2
// and T3 side by side, then T4 on top of them; every model reply takes
// delay ms.
func liveRepo(t *testing.T, dbURL string, delay int) (repo, product string) {
	t.Helper()
	var convs []map[string]any
	text := "# live\n\n## Milestone M1: Parts\nThe parts.\n\n"
	for i, id := range []string{"T1", "T2", "T3"} {
		convs = append(convs, map[string]any{"match": `Task: ` + id + `\b`, "replies": []any{write("part"+id+".txt", "part\n"), done(delay)}})
		text += "### Task " + id + ": Write part " + string(rune('A'+i)) + "\n- user_story: As a user, I want a part, so that I have it\n- priority: high\n" +
			"- files_to_create: part" + id + ".txt\n- acceptance_criteria: the part exists\n\n"
	}
	convs = append(convs, map[string]any{"match": `Task: T4\b`, "replies": []any{write("whole.txt", "whole\n"), done(delay)}})
	text += "## Milestone M2: Whole\nThe whole.\n\n### Task T4: Join the parts\n- user_story: As a user, I want the whole, so that it works\n- priority: medium\n" +
		"- dependencies: T1, T2, T3\n- files_to_create: whole.txt\n- acceptance_criteria: the whole exists\n"
	script := filepath.Join(t.TempDir(), "script.json")
	writeJSONFile(t, script, map[string]any{"conversations": convs})
	return repoWith(t, map[string]any{
		"parallel_workers":   3,
		"model":              "scripted:" + script,
		"verify":             map[string]any{"command": []string{"true"}, "timeout": "1m"},
		"build_verification": map[string]any{"command": []string{}},
		"database":           map[string]any{"url": dbURL},
	}, text)
}

// startCLI starts the taskloom binary and returns it with its stdout.
func startCLI(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(taskloom(t), args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, bufio.NewReader(stdout), &stderr
}

var uiURLPattern = regexp.MustCompile(`at (http://127\.0\.0\.1:\d+/) `)

// TestBrowser watches a live 3-worker run and reviews a paused run's
// escalation from the page in chromium: every task a node with its ID and
// status, statuses in different colours, a status change without reload,
// the escalated task's diff and test output, a retry clicked on the page
// and acted on by taskloom resume, no console error and no request outside
// the server. It keeps screenshots and prints the page's load time and
// size.
func TestBrowser(t *testing.T) {
	chromium, playwright := browserTools(t)
	t.Parallel()
	dbURL := filepath.Join(t.TempDir(), "taskloom.db") // one store, two runs

	reviewRepo, reviewRunID := escalatedRun(t, dbURL)
	liveRepoDir, liveProduct := liveRepo(t, dbURL, 3000)
	server, uiOut, uiErr := startCLI(t, "ui", reviewRunID, "--repo", reviewRepo, "--addr", "127.0.0.1:0")
	line, err := uiOut.ReadString('\n')
	require.NoError(t, err, "ui: %s", uiErr)
	u := uiURLPattern.FindStringSubmatch(line)
	require.NotNil(t, u, "no URL in %q", line)

	shots := artifacts(t)
	script, err := filepath.Abs(filepath.Join("testdata", "browser.cjs"))
	require.NoError(t, err)
	node := exec.CommandContext(t.Context(), "node", script)
	node.Env = append(os.Environ(), "PLAYWRIGHT_CORE="+playwright, "CHROMIUM="+chromium, "UI_URL="+u[1],
		"LIVE_TASKS=T1,T2,T3,T4", "REVIEW_RUN="+reviewRunID, "REVIEW_TASKS=T1,T2",
		"REVIEW_NOTE="+testkit.ReviewNote, "SCREENSHOT_DIR="+shots)
	stdin, err := node.StdinPipe()
	require.NoError(t, err)
	stdout, err := node.StdoutPipe()
	require.NoError(t, err)
	var errOut bytes.Buffer
	node.Stderr = &errOut
	require.NoError(t, node.Start())
	scriptOut := bufio.NewReader(stdout)
	ready, err := scriptOut.ReadString('\n')
	require.NoError(t, err, "browser script: %s", errOut.String())
	require.Equal(t, "ready\n", ready)

	// The browser is up: start the live run, and hand it over once it is
	// planned (it says so).
	live, liveOut, liveErr := startCLI(t, "run", liveProduct, "--repo", liveRepoDir)
	line, err = liveOut.ReadString('\n')
	require.NoError(t, err, "run: %s", liveErr)
	m := runIDPattern.FindStringSubmatch(strings.TrimSpace(line))
	require.NotNil(t, m, "no run ID in %q", line)
	liveRunID := m[1]
	for !strings.Contains(line, " planned ") {
		line, err = liveOut.ReadString('\n')
		require.NoError(t, err, "run: %s", liveErr)
	}
	go func() { _, _ = liveOut.WriteTo(new(bytes.Buffer)) }()
	_, err = io.WriteString(stdin, liveRunID+"\n")
	require.NoError(t, err)
	require.NoError(t, stdin.Close())
	result, err := scriptOut.ReadString('\n')
	require.NoError(t, err, "browser script: %s\nui stderr: %s", errOut.String(), uiErr)
	out := []byte(result)
	require.NoError(t, node.Wait(), "browser script: %s\nui stderr: %s", errOut.String(), uiErr)

	var got struct {
		LoadMS      int      `json:"load_ms"`
		LoadEventMS int      `json:"load_event_ms"`
		PageBytes   int      `json:"page_bytes"`
		LiveChange  []string `json:"live_change"`
		Screenshots []string `json:"screenshots"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "browser script printed %q", out)
	require.NoError(t, os.WriteFile(filepath.Join(shots, "ui-metrics.json"), out, 0o644))
	t.Logf("page: %d bytes of HTML, JS and CSS; loaded in %d ms (load event at %d ms); live change: %s",
		got.PageBytes, got.LoadMS, got.LoadEventMS, strings.Join(got.LiveChange, ", "))
	t.Logf("screenshots: %s; measurements: %s", strings.Join(got.Screenshots, ", "), filepath.Join(shots, "ui-metrics.json"))

	// The retry clicked on the page is recorded, and resume acts on it.
	require.Equal(t, map[string]string{"T1": `{"action":"retry","note":"` + testkit.ReviewNote + `"}`}, recordedAnswers(t, dbURL, reviewRunID))
	code, resumeOut, resumeErr := cli(t, "resume", reviewRunID, "--repo", reviewRepo)
	require.Equal(t, exitOK, code, "resume: stdout:\n%s\nstderr:\n%s", resumeOut, resumeErr)
	t1, _ := runState(t, dbURL, reviewRunID).State.Tasks.Get("T1")
	require.Equal(t, planner.StatusCompleted, t1.Status)
	require.Equal(t, "good notes\n", mainFile(t, reviewRepo, "notes.txt"))

	waited := make(chan error, 1)
	go func() { waited <- live.Wait() }()
	select {
	case err := <-waited:
		require.NoError(t, err, "the live run: %s", liveErr)
	case <-time.After(2 * time.Minute):
		t.Fatal("the live run did not end within 2 minutes")
	}
	require.Equal(t, nodes.OutcomeCompleted, runState(t, dbURL, liveRunID).State.Outcome.Get())
	require.NoError(t, server.Process.Signal(os.Interrupt))
}
