package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/report"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/store/storetest"
)

// statusProduct has two tasks: T1 delegates its file to a subtask, and
// T2's first attempt writes the wrong file, fails verification and passes
// on its retry.
const statusProduct = `# tiny: two files

## Milestone M1: Files
The files of the product.

### Task T1: Write a.txt
- user_story: As a user, I want a.txt, so that it exists
- priority: high
- files_to_create: a.txt
- acceptance_criteria: a.txt holds the letter a

### Task T2: Write b.txt
- user_story: As a user, I want b.txt, so that it exists
- priority: medium
- files_to_create: b.txt
- dependencies: T1
- acceptance_criteria: b.txt holds the letter b
`

// statusEscProduct has one task whose every attempt writes the wrong file:
// it ends escalated (max attempts).
const statusEscProduct = `# tiny: one stubborn file

## Milestone M1: Files
The files of the product.

### Task E1: Write e.txt
- user_story: As a user, I want e.txt, so that it exists
- priority: high
- files_to_create: e.txt
- acceptance_criteria: e.txt holds the letter e
`

const statusScript = `{"conversations": [
  {"match": "Subtask: write a\\.txt", "replies": [
    {"tool_calls": [{"name": "write_to_file", "arguments": {"path": "a.txt", "content": "a\n"}}]},
    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "a.txt written"}}]}]},
  {"match": "Task: T1\\b[\\s\\S]*Attempt: 1 of", "replies": [
    {"content": "I'll delegate the file.", "tool_calls": [{"name": "new_task", "arguments": {"mode": "code", "message": "Subtask: write a.txt with the letter a."}}]},
    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "T1 done"}}]}]},
  {"match": "Task: T2\\b[\\s\\S]*Attempt: 1 of", "replies": [
    {"tool_calls": [{"name": "write_to_file", "arguments": {"path": "wrong.txt", "content": "oops\n"}}]},
    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "T2 done, I think"}}]}]},
  {"match": "Task: T2\\b[\\s\\S]*Attempt: 2 of", "replies": [
    {"tool_calls": [{"name": "write_to_file", "arguments": {"path": "b.txt", "content": "b\n"}}]},
    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "T2 done"}}]}]},
  {"match": "Task: E1\\b", "replies": [
    {"tool_calls": [{"name": "write_to_file", "arguments": {"path": "not-e.txt", "content": "no\n"}}]},
    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "E1 done, I think"}}]}]}
]}`

// statusRepo is a git repo with both products, a config whose checks
// always pass, and the scripted session (outside the repo).
type statusRepo struct {
	dir    string
	script string
	// db is the --db flag and its value, or nothing for the default
	// SQLite store.
	db []string
}

func newStatusRepo(t *testing.T, dbURL string) *statusRepo {
	t.Helper()
	dir := testkit.Repo(t, map[string]string{
		"README.md":            "# tiny\n",
		"PRODUCT.md":           statusProduct,
		"PRODUCT_esc.md":       statusEscProduct,
		".project-config.json": `{"verify": {"command": ["true"]}, "build_verification": {"command": ["true"]}, "max_attempts": 2}`,
	})
	script := filepath.Join(t.TempDir(), "session.json")
	require.NoError(t, os.WriteFile(script, []byte(statusScript), 0o644))
	r := &statusRepo{dir: dir, script: script}
	if dbURL != "" {
		r.db = []string{"--db", dbURL}
	}
	return r
}

// cli runs a taskloom command on the repo's store.
func (r *statusRepo) cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	args = append(append(args, "--repo", r.dir), r.db...)
	return runCLI(t, args...)
}

// start runs a product to its end and returns the run ID.
func (r *statusRepo) start(t *testing.T, product string, wantCode int) string {
	t.Helper()
	code, out, errOut := r.cli(t, "run", filepath.Join(r.dir, product), "--model", "scripted:"+r.script)
	require.Equal(t, wantCode, code, "stdout: %s\nstderr: %s", out, errOut)
	first, _, _ := strings.Cut(out, "\n")
	runID, ok := strings.CutPrefix(first, "run ")
	require.True(t, ok, "the run ID comes first: %q", first)
	return runID
}

// statusJSON parses the output of status --json and checks that it has
// the documented keys, no more and no fewer.
func statusJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m), out)
	require.ElementsMatch(t, []string{"run_id", "status", "target_branch", "tasks", "current_task_ids", "workers", "escalations", "decisions", "no_change", "usage"}, keysOf(m))
	return m
}

func keysOf(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

func TestStatusRunsHistory(t *testing.T) {
	t.Parallel()
	for name, dbURL := range map[string]func(t *testing.T) string{
		"sqlite":   func(*testing.T) string { return "" },
		"postgres": func(t *testing.T) string { return storetest.NewPostgresSchema(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testStatusRunsHistory(t, newStatusRepo(t, dbURL(t)))
		})
	}
}

func testStatusRunsHistory(t *testing.T, r *statusRepo) {
	done := r.start(t, "PRODUCT.md", exitOK)

	// status --json: the documented exact shape (statusJSON checks its keys).
	code, out, errOut := r.cli(t, "status", done, "--json")
	require.Equal(t, exitOK, code, errOut)
	st := statusJSON(t, out)
	require.Equal(t, done, st["run_id"])
	require.Equal(t, "main", st["target_branch"])
	require.Equal(t, "completed", st["status"])
	require.Equal(t, map[string]any{"total": 2.0, "pending": 0.0, "in_progress": 0.0, "completed": 2.0,
		"failed": 0.0, "blocked": 0.0, "skipped": 0.0, "progress": "100%"}, st["tasks"])
	require.Equal(t, []any{}, st["current_task_ids"])
	require.Equal(t, []any{}, st["workers"], "no worker runs a task of a finished run")
	require.Equal(t, []any{}, st["escalations"])
	usage, _ := st["usage"].(map[string]any)
	require.ElementsMatch(t, []string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd", "estimated"}, keysOf(usage))
	require.Nil(t, usage["cost_usd"], "the scripted model has no price: no cost rather than a wrong one")

	code, out, errOut = r.cli(t, "status", done)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "run "+done+": completed\n")
	require.Contains(t, out, "progress 100%: 2 of 2 tasks completed\n")
	require.Contains(t, out, "tasks: pending 0, in_progress 0, completed 2, failed 0, blocked 0, skipped 0\n")
	require.Regexp(t, `(?m)^milestones:\n  M1\s+completed\s+Files$`, out)
	require.NotContains(t, out, "escalations:")

	// history: every checkpoint, oldest first, with what changed.
	code, out, errOut = r.cli(t, "history", done, "--json")
	require.Equal(t, exitOK, code, errOut)
	var hist []report.Entry
	require.NoError(t, json.Unmarshal([]byte(out), &hist), out)
	require.Greater(t, len(hist), 5)
	for i, e := range hist {
		require.Equal(t, int64(i), e.Step, "steps in order, none missing")
	}
	require.Equal(t, "input", hist[0].Source)
	require.Equal(t, "run started", hist[0].Summary)
	require.Equal(t, []string{"task_breakdown"}, hist[1].Nodes)
	require.Equal(t, "planned 2 tasks (T1, T2)", hist[1].Summary)
	var summaries []string
	for _, e := range hist {
		summaries = append(summaries, e.Summary)
	}
	all := strings.Join(summaries, "\n")
	for _, want := range []string{
		"T1 pending→in_progress",
		"T1 in_progress→completed; integrated T1/1",
		"T2 in_progress→pending (attempt 1 failed)",
		"T2 in_progress→completed; integrated T2/2",
	} {
		require.Contains(t, all, want)
	}
	require.Contains(t, hist[len(hist)-1].Summary, "run completed")
	require.Equal(t, []string{"build_verification"}, hist[len(hist)-1].Nodes)
	failed := findEntry(t, hist, "T2 in_progress→pending")
	require.Equal(t, []report.TaskChange{{TaskID: "T2", From: "in_progress", To: "pending"}}, failed.Changes)
	require.NotEmpty(t, failed.Log, "the failure's log line")

	code, out, errOut = r.cli(t, "history", done)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "run "+done+": ")
	require.Regexp(t, `(?m)^STEP\s+NODE\s+TIME\s+SUMMARY$`, out)
	require.Regexp(t, `(?m)^1\s+task_breakdown\s+\S+ \S+\s+planned 2 tasks \(T1, T2\)$`, out)

	code, out, errOut = r.cli(t, "history", done, "--limit", "3", "--json")
	require.Equal(t, exitOK, code, errOut)
	var last3 []report.Entry
	require.NoError(t, json.Unmarshal([]byte(out), &last3))
	require.Equal(t, hist[len(hist)-3:], last3, "the newest 3, summarized against the step before them")
	code, out, _ = r.cli(t, "history", done, "--limit", "3")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "the newest 3 of "+strconv.Itoa(len(hist))+" checkpoints (--all shows all)")

	// --export: the last attempt by default, subtasks in subfolders.
	exp := filepath.Join(t.TempDir(), "t1")
	code, out, errOut = r.cli(t, "history", done, "--task", "T1", "--export", exp)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "wrote the conversation of T1 attempt 1 to "+exp+"\n", out)
	for _, d := range []string{exp, filepath.Join(exp, "subtask-1")} {
		for _, f := range []string{"ui_messages.json", "api_conversation_history.json", "task_metadata.json"} {
			require.FileExists(t, filepath.Join(d, f))
		}
	}
	require.Contains(t, readText(t, filepath.Join(exp, "api_conversation_history.json")), "Task: T1")
	require.Contains(t, readText(t, filepath.Join(exp, "subtask-1", "api_conversation_history.json")), "Subtask: write a.txt")
	require.Contains(t, readText(t, filepath.Join(exp, "task_metadata.json")), done+"/T1/1")

	last := filepath.Join(t.TempDir(), "t2")
	code, out, errOut = r.cli(t, "history", done, "--task", "T2", "--export", last)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "T2 attempt 2")
	require.Contains(t, readText(t, filepath.Join(last, "api_conversation_history.json")), `b.txt`)
	first := filepath.Join(t.TempDir(), "t2-1")
	code, _, errOut = r.cli(t, "history", done, "--task", "T2", "--attempt", "1", "--export", first)
	require.Equal(t, exitOK, code, errOut)
	api := readText(t, filepath.Join(first, "api_conversation_history.json"))
	require.Contains(t, api, "wrong.txt")
	require.Contains(t, api, "Attempt: 1 of 2")
	require.NoDirExists(t, filepath.Join(first, "subtask-1"))

	code, _, errOut = r.cli(t, "history", done, "--task", "T2", "--attempt", "5", "--export", t.TempDir())
	require.Equal(t, exitError, code)
	require.Equal(t, "taskloom: task T2 of run "+done+" has no conversation for attempt 5; it has attempt(s) 1, 2\n", errOut)
	code, _, errOut = r.cli(t, "history", done, "--task", "T9", "--export", t.TempDir())
	require.Equal(t, exitError, code)
	require.Equal(t, "taskloom: run "+done+" has no task T9; its tasks are T1, T2\n", errOut)

	// A second run that ends escalated: the latest, so status's default.
	esc := r.start(t, "PRODUCT_esc.md", exitReview)
	code, out, errOut = r.cli(t, "status", "--json")
	require.Equal(t, exitOK, code, errOut)
	st = statusJSON(t, out)
	require.Equal(t, esc, st["run_id"])
	require.Equal(t, "paused", st["status"])
	require.Equal(t, map[string]any{"total": 1.0, "pending": 0.0, "in_progress": 0.0, "completed": 0.0,
		"failed": 1.0, "blocked": 0.0, "skipped": 0.0, "progress": "0%"}, st["tasks"])
	escs, ok := st["escalations"].([]any)
	require.True(t, ok, "escalations: %v", st["escalations"])
	require.Len(t, escs, 1)
	e := escs[0].(map[string]any)
	require.ElementsMatch(t, []string{"task_id", "reason", "error"}, keysOf(e))
	require.Equal(t, "E1", e["task_id"])
	require.Equal(t, "max_attempts", e["reason"])
	require.Contains(t, e["error"], "e.txt")

	code, out, errOut = r.cli(t, "status")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "run "+esc+": paused\n")
	require.Regexp(t, `(?m)^escalations:\n  E1\s+max_attempts\s+\S.*e\.txt`, out)
	require.Contains(t, out, "taskloom review "+esc)

	// runs: both, newest first.
	code, out, errOut = r.cli(t, "runs", "--json")
	require.Equal(t, exitOK, code, errOut)
	var rows []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	require.Len(t, rows, 2)
	require.Equal(t, esc, rows[0]["run_id"])
	require.Equal(t, "paused", rows[0]["status"])
	require.Equal(t, "0%", rows[0]["progress"])
	require.Equal(t, filepath.Join(r.dir, "PRODUCT_esc.md"), rows[0]["product"])
	require.Equal(t, done, rows[1]["run_id"])
	require.Equal(t, "completed", rows[1]["status"])
	require.Equal(t, "100%", rows[1]["progress"])

	code, out, errOut = r.cli(t, "runs")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Regexp(t, `^ID\s+PRODUCT\s+STATUS\s+STARTED\s+PROGRESS$`, lines[0])
	require.Regexp(t, `^`+regexp.QuoteMeta(esc)+`\s+PRODUCT_esc\.md\s+paused\s+\S+ \S+\s+0% \(0/1\)$`, lines[1])
	require.Regexp(t, `^`+regexp.QuoteMeta(done)+`\s+PRODUCT\.md\s+completed\s+\S+ \S+\s+100% \(2/2\)$`, lines[2])

	// An unknown run: one line naming the run and the store.
	for _, cmd := range [][]string{{"status", "r-nope"}, {"history", "r-nope"}} {
		code, out, errOut = r.cli(t, cmd...)
		require.Equal(t, exitError, code)
		require.Empty(t, out)
		require.Regexp(t, `^taskloom: run r-nope not found in \S+; pass --db or --repo for the store that holds it\n$`, errOut)
		if r.db == nil {
			require.Contains(t, errOut, filepath.Join(r.dir, ".taskloom", "taskloom.db"))
		}
	}
}

func findEntry(t *testing.T, hist []report.Entry, summary string) report.Entry {
	t.Helper()
	for _, e := range hist {
		if strings.Contains(e.Summary, summary) {
			return e
		}
	}
	t.Fatalf("no checkpoint summary contains %q", summary)
	return report.Entry{}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestStatusUnknownRunMasksPassword(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewPostgresSchema(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), "s3cr3t-pw") // trust auth ignores it
	code, out, errOut := runCLI(t, "status", "r-nope", "--db", u.String(), "--repo", t.TempDir())
	require.Equal(t, exitError, code, out)
	require.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	require.Contains(t, errOut, "run r-nope not found in ")
	require.NotContains(t, errOut, "s3cr3t-pw")
}

func TestStatusNoRuns(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	code, out, errOut := runCLI(t, "status", "--repo", repo)
	require.Equal(t, exitError, code, out)
	require.Equal(t, "taskloom: no taskloom runs yet in "+repo+": start one with taskloom run PRODUCT.md\n", errOut)
	require.NoDirExists(t, filepath.Join(repo, ".taskloom"), "status created the store")

	code, out, errOut = runCLI(t, "runs", "--repo", repo, "--json")
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "[]\n", out)
}

func TestHistoryUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"history"}, "history needs a run ID"},
		{[]string{"history", "r1", "--export", "x"}, "--export needs --task ID"},
		{[]string{"history", "r1", "--task", "T1"}, "--task needs --export DIR"},
		{[]string{"history", "r1", "--attempt", "2"}, "--attempt needs --task ID"},
		{[]string{"history", "r1", "--task", "T1", "--export", "x", "--attempt", "-1"}, "--attempt must be at least 1"},
		{[]string{"history", "r1", "--limit", "0"}, "--limit must be at least 1"},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		require.Equal(t, exitUsage, code, "%v: %s%s", tc.args, out, errOut)
		require.Contains(t, errOut, tc.want, "%v", tc.args)
	}
}

// TestHistoryExportRalphIterations exports attempts made of Ralph
// iterations from a store seeded directly: one folder per iteration, and
// an attempt of one iteration straight into the folder.
func TestHistoryExportRalphIterations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	dbPath := filepath.Join(repo, ".taskloom", "taskloom.db")
	require.NoError(t, os.MkdirAll(filepath.Dir(dbPath), 0o755))
	saver, err := session.OpenStore(ctx, dbPath, nil)
	require.NoError(t, err)
	store, err := nodes.NewStore(saver)
	require.NoError(t, err)
	const runID = "r-ralph"
	require.NoError(t, store.CreateRun(ctx, nodes.Run{ID: runID, ProductPath: filepath.Join(repo, "PRODUCT.md"), Repo: repo}))
	hist := store.Histories(runID)
	for _, c := range []struct{ id, text string }{
		{"r-ralph/R1/1/i1", "first iteration"},
		{"r-ralph/R1/1/i2", "second iteration"},
		{"r-ralph/R1/1/i2.1", "a subtask of the second"},
		{"r-ralph/R1/2/i1", "second attempt"},
	} {
		meta := agent.Metadata{ID: c.id, RootID: c.id, Mode: "code", Status: "completed"}
		if root, _, ok := strings.Cut(c.id, "."); ok {
			meta.RootID, meta.ParentID = root, root
		}
		if c.id == "r-ralph/R1/1/i2" {
			meta.ChildIDs = []string{"r-ralph/R1/1/i2.1"}
		}
		require.NoError(t, hist.Save(ctx, &agent.Record{Meta: meta,
			API: []agent.APIMessage{{Role: "user", Content: []agent.Block{{Type: "text", Text: c.text}}}}}))
	}
	require.NoError(t, store.Close())
	require.NoError(t, saver.Close())

	dir := filepath.Join(t.TempDir(), "r1")
	code, out, errOut := runCLI(t, "history", runID, "--repo", repo, "--task", "R1", "--attempt", "1", "--export", dir)
	require.Equal(t, exitOK, code, errOut)
	it1, it2 := filepath.Join(dir, "iteration-1"), filepath.Join(dir, "iteration-2")
	require.Equal(t, "wrote 2 conversations (Ralph iterations) of R1 attempt 1:\n  "+it1+"\n  "+it2+"\n", out)
	require.Contains(t, readText(t, filepath.Join(it1, "api_conversation_history.json")), "first iteration")
	require.Contains(t, readText(t, filepath.Join(it2, "api_conversation_history.json")), "second iteration")
	require.Contains(t, readText(t, filepath.Join(it2, "subtask-1", "api_conversation_history.json")), "a subtask of the second")
	require.NoFileExists(t, filepath.Join(dir, "ui_messages.json"))

	last := filepath.Join(t.TempDir(), "last")
	code, out, errOut = runCLI(t, "history", runID, "--repo", repo, "--task", "R1", "--export", last)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "wrote the conversation of R1 attempt 2 to "+last+"\n", out)
	require.Contains(t, readText(t, filepath.Join(last, "api_conversation_history.json")), "second attempt")

	// A task without conversations, in a run without checkpoints.
	code, _, errOut = runCLI(t, "history", runID, "--repo", repo, "--task", "R2", "--export", t.TempDir())
	require.Equal(t, exitError, code)
	require.Equal(t, "taskloom: run r-ralph has no task R2; its tasks are -\n", errOut)
}

// A run on a store given with --db prints the commands to run next with
// that --db, its password masked, so that they find the same store; the
// repo's own store needs none.
func TestNextCommandsCarryTheStoreFlag(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(storetest.NewPostgresSchema(t))
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), "s3cr3t-pw") // trust auth ignores it
	r := newStatusRepo(t, u.String())
	code, out, errOut := r.cli(t, "run", filepath.Join(r.dir, "PRODUCT_esc.md"), "--model", "scripted:"+r.script)
	require.Equal(t, exitReview, code, "stdout: %s\nstderr: %s", out, errOut)
	runID := strings.TrimPrefix(strings.SplitN(out, "\n", 2)[0], "run ")
	db := " --repo " + r.dir + " --db '" + config.RedactURL(u.String()) + "'"
	require.NotContains(t, db, "s3cr3t-pw")
	require.Contains(t, out, "paused for human review: taskloom review "+runID+db+", then taskloom resume "+runID+db+"\n")
	_, out, _ = r.cli(t, "status", runID)
	require.Contains(t, out, "next: review the escalations with taskloom review "+runID+db+", then taskloom resume "+runID+db+"\n")
	require.NotContains(t, out+errOut, "s3cr3t-pw")

	plain := newStatusRepo(t, "")
	runID = plain.start(t, "PRODUCT_esc.md", exitReview)
	_, out, _ = plain.cli(t, "status", runID)
	at := " --repo " + plain.dir
	require.Contains(t, out, "next: review the escalations with taskloom review "+runID+at+", then taskloom resume "+runID+at+"\n")
}

// resume, review and replan work on a run already there: in a repo that
// has no store they say so in one line and create none, where they used
// to leave an empty one behind.
func TestRunCommandsCreateNoStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	for _, args := range [][]string{
		{"resume", "r-nope"},
		{"review", "r-nope", "--action", "skip"},
		{"replan", "r-nope", filepath.Join(dir, "PRODUCT.md")},
	} {
		code, out, errOut := runCLI(t, append(args, "--repo", dir)...)
		require.Equal(t, exitError, code, "%v: %s%s", args, out, errOut)
		require.Equal(t, "taskloom: no taskloom runs yet in "+dir+": start one with taskloom run PRODUCT.md, or pass the --db of the store that holds the run\n", errOut, args)
		require.NoDirExists(t, filepath.Join(dir, ".taskloom"), args)
	}
}
