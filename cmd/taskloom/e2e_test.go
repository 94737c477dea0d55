package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/examples"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/store/storetest"
)

// exampleRepo copies the textkit example into a new git repo and returns
// its folder. config changes .project-config.json; session changes the
// scripted session.
func exampleRepo(t *testing.T, config func(map[string]any), session func(*llm.Script)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "textkit repo")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	project, sessionJSON, err := examples.Textkit()
	require.NoError(t, err)
	require.NoError(t, examples.CopyProject(project, dir))
	if config != nil {
		path := filepath.Join(dir, ".project-config.json")
		var cfg map[string]any
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &cfg))
		config(cfg)
		data, err = json.MarshalIndent(cfg, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, data, 0o644))
	}
	if session != nil {
		s, err := llm.ParseScript(sessionJSON)
		require.NoError(t, err)
		session(s)
		sessionJSON, err = json.Marshal(s)
		require.NoError(t, err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "textkit")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".taskloom"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".taskloom", "demo-session.json"), sessionJSON, 0o644))
	return dir
}

// git runs git in a test repo with a test identity.
var git = testkit.Git

// helloProduct is a PRODUCT.md of one task, T1, that creates hello.txt.
const helloProduct = "# p\n\n## Milestone M1: One\n\n### Task T1: Say hello\n- acceptance_criteria:\n  - hello.txt exists\n- files_to_create: hello.txt\n"

// greetRepo makes a git repo of module example.com/name with an empty Go
// package greet, the config and the PRODUCT.md given.
func greetRepo(t *testing.T, name, config, product string) string {
	t.Helper()
	return testkit.Repo(t, map[string]string{
		"go.mod":               "module example.com/" + name + "\n\ngo 1.22\n",
		"greet/doc.go":         "// Package greet greets.\npackage greet\n",
		".project-config.json": config,
		"PRODUCT.md":           product,
	})
}

// writeAndFinish is a scripted attempt's replies: write content to path,
// then finish.
func writeAndFinish(path, content string) []llm.Reply {
	args, _ := json.Marshal(map[string]string{"path": path, "content": content})
	return []llm.Reply{
		{ToolCalls: []llm.ScriptedToolCall{{Name: "write_to_file", Arguments: args}}},
		{ToolCalls: []llm.ScriptedToolCall{{Name: "attempt_completion", Arguments: json.RawMessage(`{"result": "done"}`)}}},
	}
}

// writeSession writes a scripted session to a file and returns its path.
func writeSession(t *testing.T, s llm.Script) string {
	t.Helper()
	data, err := json.Marshal(s)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "session.json")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

// taskloom runs the CLI in process.
func taskloom(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Execute(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// skipShort skips a long end-to-end test under go test -short, the quick
// loop. The longest ones, which drive the built binary, are in test/e2e.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a long end-to-end test; go test -short skips it")
	}
}

// longE2E is skipShort for a test that also runs in parallel with the
// others: it sets no environment variable and no pointFunc.
func longE2E(t *testing.T) {
	t.Helper()
	skipShort(t)
	t.Parallel()
}

// storeArgs returns the --db flag of a store kind.
func storeArgs(t *testing.T, kind string) []string {
	if kind == "postgres" {
		return []string{"--db", storetest.NewPostgresSchema(t)}
	}
	return nil
}

var runIDLine = regexp.MustCompile(`(?m)^run (r[0-9]{8}-[0-9]{6}-[0-9a-f]+)`)

func runID(t *testing.T, stdout string) string {
	t.Helper()
	m := runIDLine.FindStringSubmatch(stdout)
	require.NotNil(t, m, "no run ID in output:\n%s", stdout)
	return m[1]
}

// trailers counts the Taskloom-Task trailers on main by task.
func trailers(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := git(t, dir, "log", "--format=%(trailers:key=Taskloom-Task,valueonly)", "main")
	byTask := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		parts := strings.Split(line, "/")
		require.Len(t, parts, 3, "trailer %q", line)
		byTask[parts[1]] = append(byTask[parts[1]], parts[2])
	}
	return byTask
}

func goTestPasses(t *testing.T, dir string) {
	t.Helper()
	git(t, dir, "diff", "--quiet", "HEAD") // the checkout of main is clean
	cmd := exec.Command("go", "test", "./...")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go test on main:\n%s", out)
}

func noWorktreesLeft(t *testing.T, dir string) {
	t.Helper()
	list := strings.TrimSpace(git(t, dir, "worktree", "list", "--porcelain"))
	require.Equal(t, 1, strings.Count(list, "worktree "), "worktrees left:\n%s", list)
	entries, _ := os.ReadDir(filepath.Join(dir, ".taskloom", "worktrees"))
	require.Empty(t, entries)
}

func sortedKeys(m map[string][]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestE2EPipeline(t *testing.T) {
	longE2E(t)
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, workers := range []int{2, 3} {
			t.Run(kind+"/workers="+itoa(workers), func(t *testing.T) {
				dir := exampleRepo(t, func(c map[string]any) { c["parallel_workers"] = workers }, nil)
				args := append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, storeArgs(t, kind)...)
				code, stdout, stderr := taskloom(t, args...)
				require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
				id := runID(t, stdout)
				goTestPasses(t, dir)
				noWorktreesLeft(t, dir)
				tr := trailers(t, dir)
				require.Equal(t, []string{"T1", "T2", "T3-a", "T3-b", "T4"}, sortedKeys(tr), "each task is integrated")
				for task, seqs := range tr {
					require.Len(t, seqs, 1, "task %s integrated once", task)
				}
				require.Equal(t, []string{"2"}, tr["T2"], "T2 failed its first try and passed its second")
				require.Contains(t, stdout, "T2 failed attempt 1 of 3; retrying")
				require.Contains(t, stdout, "run "+id+": completed")

				// The run's state agrees.
				s := openTestSession(t, dir, storeArgs2(args))
				g, err := s.Graph()
				require.NoError(t, err)
				res, err := g.State(context.Background(), id, -1)
				require.NoError(t, err)
				require.Equal(t, nodes.OutcomeCompleted, res.State.Outcome.Get())
				t2, _ := res.State.Tasks.Get("T2")
				require.Equal(t, 1, t2.Attempts, "one failed attempt counted")

				// One attempt number everywhere: the trailer says T2/2, and
				// so do the history and its export.
				hargs := append([]string{"history", id, "--all", "--repo", dir}, args[4:]...)
				code, hout, herr := taskloom(t, hargs...)
				require.Equal(t, 0, code, herr)
				require.Contains(t, hout, "T2 attempt 1")
				require.Contains(t, hout, "T2 attempt 2")
				require.NotContains(t, hout, "T2 attempt 3")
				for _, n := range []string{"1", "2"} {
					code, _, herr = taskloom(t, append([]string{"history", id, "--task", "T2", "--attempt", n, "--export", t.TempDir(), "--repo", dir}, args[4:]...)...)
					require.Equal(t, 0, code, "history --attempt %s: %s", n, herr)
				}
				code, _, _ = taskloom(t, append([]string{"history", id, "--task", "T2", "--attempt", "3", "--export", t.TempDir(), "--repo", dir}, args[4:]...)...)
				require.NotEqual(t, 0, code, "there was no attempt 3")
				if workers > 1 {
					require.Contains(t, stdout, "started T1")
				}
			})
		}
	}
}

func storeArgs2(args []string) string {
	for i, a := range args {
		if a == "--db" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// openTestSession opens a repo's store the way the commands do.
func openTestSession(t *testing.T, dir, dbURL string) *session.Session {
	t.Helper()
	cmd := newStatusLikeCmd()
	if dbURL != "" {
		require.NoError(t, cmd.Flags().Set("db", dbURL))
	}
	s, err := session.Open(context.Background(), session.Opts{Repo: dir, Flags: cmd.Flags()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestE2EMaxAttemptsReview(t *testing.T) {
	longE2E(t)
	// With one attempt, T2's failing first try is escalated.
	fixedT2 := func(s *llm.Script) {
		var fixed llm.Conversation
		for _, c := range s.Conversations {
			if strings.HasPrefix(c.Match, `Task: T2 [\s\S]*Attempt: 2 of`) {
				fixed = c
			}
		}
		fixed.Match = `Task: T2 [\s\S]*use strings\.Fields`
		s.Conversations = append([]llm.Conversation{fixed}, s.Conversations...)
	}
	type reviewCase struct {
		action string
		note   string
		fix    bool   // commit a fix to main by hand first
		want   int    // exit code of the resume
		status string // T2's final status
		store  string
	}
	var cases []reviewCase
	for _, store := range []string{"sqlite", "postgres"} {
		for _, tc := range []reviewCase{
			{action: "retry", note: "use strings.Fields", want: 0, status: "completed"},
			{action: "skip", want: 5, status: "skipped"}, // partial: T4 is blocked
			{action: "fixed", fix: true, want: 0, status: "completed"},
			{action: "abort", want: 4, status: "failed"},
		} {
			tc.store = store
			cases = append(cases, tc)
		}
	}
	for _, tc := range cases {
		t.Run(tc.store+"/"+tc.action, func(t *testing.T) {
			dir := exampleRepo(t, func(c map[string]any) { c["max_attempts"] = 1 }, fixedT2)
			db := storeArgs(t, tc.store)
			code, stdout, stderr := taskloom(t, append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, db...)...)
			require.Equal(t, 3, code, "paused for review\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			id := runID(t, stdout)
			if tc.fix {
				src, err := os.ReadFile(filepath.Join("..", "..", "examples", "textkit", "session.json"))
				require.NoError(t, err)
				require.Contains(t, string(src), "strings.Fields")
				require.NoError(t, os.WriteFile(filepath.Join(dir, "textkit", "count.go"), []byte("package textkit\n\nimport \"strings\"\n\n// WordCount counts words.\nfunc WordCount(s string) int { return len(strings.Fields(s)) }\n"), 0o644))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "textkit", "count_test.go"), []byte("package textkit\n\nimport \"testing\"\n\nfunc TestWordCount(t *testing.T) {\n\tif WordCount(\" a b \") != 2 {\n\t\tt.Fatal(\"want 2\")\n\t}\n}\n"), 0o644))
				git(t, dir, "add", "-A")
				git(t, dir, "commit", "-q", "-m", "fix T2 by hand")
			}
			args := []string{"review", id, "--repo", dir, "--task", "T2", "--action", tc.action}
			if tc.action == "abort" {
				args = []string{"review", id, "--repo", dir, "--action", "abort"}
			}
			if tc.note != "" {
				args = append(args, "--note", tc.note)
			}
			code, stdout, stderr = taskloom(t, append(args, db...)...)
			require.Equal(t, 0, code, "review\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			code, stdout, stderr = taskloom(t, append([]string{"resume", id, "--repo", dir}, db...)...)
			require.Equal(t, tc.want, code, "resume\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			s := openTestSession(t, dir, storeArgs2(db))
			g, err := s.Graph()
			require.NoError(t, err)
			res, err := g.State(context.Background(), id, -1)
			require.NoError(t, err)
			t2, _ := res.State.Tasks.Get("T2")
			require.Equal(t, tc.status, string(t2.Status))
			if tc.want != 4 {
				goTestPasses(t, dir)
			}
			noWorktreesLeft(t, dir)
		})
	}
}

func TestE2ECycleEscalates(t *testing.T) {
	longE2E(t)
	forEachStore(t, testE2ECycleEscalates)
}

// forEachStore runs fn on SQLite and on PostgreSQL, with the --db flag of
// each (none for SQLite's default).
func forEachStore(t *testing.T, fn func(t *testing.T, db []string)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) { fn(t, storeArgs(t, kind)) })
	}
}

func testE2ECycleEscalates(t *testing.T, db []string) {
	dir := exampleRepo(t, nil, nil)
	product := `# cyclic

## Milestone M1: One

### Task T1: First
- user_story: As a user I want one thing
- acceptance_criteria:
  - it works
- files_to_create: a.go
- dependencies: T2
- priority: high

### Task T2: Second
- user_story: As a user I want another thing
- acceptance_criteria:
  - it works too
- files_to_create: b.go
- dependencies: T1
- priority: high
`
	path := filepath.Join(t.TempDir(), "PRODUCT.md")
	require.NoError(t, os.WriteFile(path, []byte(product), 0o644))
	code, stdout, stderr := taskloom(t, append([]string{"run", path, "--repo", dir}, db...)...)
	require.Equal(t, 3, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stdout, "dependency cycle T1 -> T2 -> T1")
	id := runID(t, stdout)
	s := openTestSession(t, dir, storeArgs2(db))
	g, err := s.Graph()
	require.NoError(t, err)
	res, err := g.State(context.Background(), id, -1)
	require.NoError(t, err)
	require.Len(t, res.Interrupts, 2)
	var p nodes.EscalationPayload
	require.NoError(t, res.Interrupts[0].Decode(&p))
	require.Equal(t, nodes.ReasonCycle, p.Reason)
}

func TestE2EMalformedToolCallRetried(t *testing.T) {
	longE2E(t)
	forEachStore(t, testE2EMalformedToolCallRetried)
}

func testE2EMalformedToolCallRetried(t *testing.T, db []string) {
	// T1's worker first sends malformed arguments; the agent answers with an
	// error tool_result and the worker's next reply is the good call.
	dir := exampleRepo(t, nil, func(s *llm.Script) {
		for i, c := range s.Conversations {
			if strings.HasPrefix(c.Match, `Task: T1 `) {
				bad := llm.Reply{Content: "Writing the file.", ToolCalls: []llm.ScriptedToolCall{{Name: "write_to_file", Arguments: json.RawMessage(`"{\"path\": \"textkit/reverse.go\", \"content\": "`)}}}
				s.Conversations[i].Replies = append([]llm.Reply{bad}, c.Replies...)
			}
		}
	})
	code, stdout, stderr := taskloom(t, append([]string{"run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir}, db...)...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	id := runID(t, stdout)
	s := openTestSession(t, dir, storeArgs2(db))
	convs, err := s.Store.Conversations(context.Background(), id, "T1")
	require.NoError(t, err)
	require.NotEmpty(t, convs)
	rec, err := s.Store.Histories(id).Load(context.Background(), convs[0])
	require.NoError(t, err)
	api, err := json.Marshal(rec.API)
	require.NoError(t, err)
	ui, err := json.Marshal(rec.UI)
	require.NoError(t, err)
	require.Contains(t, strings.ToLower(string(api)), "json", "the error tool_result names the bad JSON")
	require.Contains(t, string(ui), `"error"`, "the UI history records the error")
	goTestPasses(t, dir)
}

var _ = checkpoint.MaskURL

func itoa(n int) string { return strconv.Itoa(n) }

// newStatusLikeCmd is a command with the store flags, for openSession.
func newStatusLikeCmd() *cobra.Command {
	cmd := &cobra.Command{}
	cmd.Flags().String("db", "", "")
	cmd.Flags().String("model", "", "")
	cmd.Flags().Int("workers", 0, "")
	return cmd
}

// TestE2EBuildVerificationRevertsCulprit: two parallel tasks pass their
// tests alone, but together break the build on main (both define Hello).
// Build verification finds the newer one, reverts it and retries it; its
// second try passes and main builds.
func TestE2EBuildVerificationRevertsCulprit(t *testing.T) {
	longE2E(t)
	dir := greetRepo(t, "clash", `{"parallel_workers": 2, "verify": {"command": ["go", "test", "./..."]}, "build_verification": {"command": ["go", "vet", "./..."]}}`, `# clash

## Milestone M1: Greetings

### Task T1: English greeting
- user_story: As a user I want an English greeting
- acceptance_criteria:
  - Hello returns hello
- files_to_create: greet/en.go
- priority: high

### Task T2: French greeting
- user_story: As a user I want a French greeting
- acceptance_criteria:
  - Bonjour returns bonjour
- files_to_create: greet/fr.go
- priority: high
`)
	script := llm.Script{Conversations: []llm.Conversation{
		{Match: `Task: T1 `, Replies: writeAndFinish("greet/en.go", "package greet\n\n// Hello greets.\nfunc Hello() string { return \"hello\" }\n")},
		// A second Hello: fine alone, a duplicate beside T1's.
		{Match: `Task: T2 [\s\S]*Attempt: 1 of`, Replies: writeAndFinish("greet/fr.go", "package greet\n\n// Hello greets in French.\nfunc Hello() string { return \"bonjour\" }\n")},
		{Match: `Task: T2 [\s\S]*Attempt: 2 of`, Replies: writeAndFinish("greet/fr.go", "package greet\n\n// Bonjour greets in French.\nfunc Bonjour() string { return \"bonjour\" }\n")},
	}}
	sessionPath := writeSession(t, script)

	code, stdout, stderr := taskloom(t, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir, "--model", "scripted:"+sessionPath)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stdout, "build verification failed on main")
	require.Contains(t, stdout, "T2 broke main; reverted it")
	require.Contains(t, stdout, "build verification passed on main")
	log := git(t, dir, "log", "--format=%s", "main")
	require.Contains(t, log, "Revert T2: it broke the build on main")
	tr := trailers(t, dir)
	require.Equal(t, []string{"1"}, tr["T1"])
	require.Len(t, tr["T2"], 2, "T2's first try (later reverted) and its second")
	goTestPasses(t, dir)
	noWorktreesLeft(t, dir)
}

// TestE2EAPIKeyNeverStored: a provider that echoes the API key in its
// errors. The key reaches the provider, and never the output, the
// checkpoints or the histories.
func TestE2EAPIKeyNeverStored(t *testing.T) {
	skipShort(t)
	const key = "sk-test-5ecretKeyThatMustNotLeak0123456789"
	// An openai-compatible server gets a key only from llm.api_key_env.
	t.Setenv("MY_COMPATIBLE_KEY", key)
	var sawKey atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), key) {
			sawKey.Store(true)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error": {"message": "Incorrect API key provided: %s", "type": "invalid_request_error"}}`, key)
	}))
	defer srv.Close()
	dir := testkit.Repo(t, map[string]string{
		".project-config.json": `{"max_attempts": 1, "verify": {"command": ["true"]}, "build_verification": {"command": ["true"]}, "llm": {"api_key_env": "MY_COMPATIBLE_KEY"}}`,
		"PRODUCT.md":           "# p\n\n## Milestone M1: One\n\n### Task T1: A file\n- acceptance_criteria:\n  - a.txt exists\n- files_to_create: a.txt\n",
	})
	code, stdout, stderr := taskloom(t, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir, "--model", "openai-compatible:gpt-test@"+srv.URL+"/v1")
	require.True(t, sawKey.Load(), "the key reached the provider")
	require.Equal(t, 1, code, "a refused key stops the run\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.NotContains(t, stdout+stderr, key)
	require.Contains(t, stdout, "T1")
	// Nothing in the store holds it: checkpoints, pending writes, runs and
	// agent histories all live in the SQLite files.
	matches, err := filepath.Glob(filepath.Join(dir, ".taskloom", "taskloom.db*"))
	require.NoError(t, err)
	require.NotEmpty(t, matches)
	for _, m := range matches {
		data, err := os.ReadFile(m)
		require.NoError(t, err)
		require.NotContains(t, string(data), key, "%s holds the key", m)
		require.NotContains(t, string(data), "5ecretKey", "%s holds part of the key", m)
	}
	// The redacted provider error is what the reviewer sees.
	code, stdout, _ = taskloom(t, "status", "--repo", dir, "--json")
	require.Equal(t, 0, code)
	require.NotContains(t, stdout, key)
}

// TestE2ECommandWorker runs the pipeline with an external agent CLI (a
// shell script), alone and in a Ralph loop.
func TestE2ECommandWorker(t *testing.T) {
	skipShort(t)
	for _, tc := range []struct {
		name  string
		ralph bool
	}{{"command", false}, {"ralph", true}} {
		t.Run(tc.name, func(t *testing.T) {
			// An external agent on a task list needs no model, and no key.
			t.Setenv("ANTHROPIC_API_KEY", "")
			agentScript := filepath.Join(t.TempDir(), "agent.sh")
			// The agent writes the task's file on its second run only, so
			// the Ralph loop needs two iterations.
			require.NoError(t, os.WriteFile(agentScript, []byte(`#!/bin/sh
n=$(cat .runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > .runs
case "$1" in *"Task: T1 "*) ;; *) echo "no task line"; exit 9 ;; esac
if [ $n -ge 2 ] || [ "$RALPH" = "" ]; then echo "hello from $2" > hello.txt; fi
echo '{"type":"result","result":"wrote hello.txt <promise>DONE</promise>","total_cost_usd":0.01,"session_id":"s1"}'
`), 0o755))
			cfg := map[string]any{
				"verify":             map[string]any{"command": []string{"test", "-f", "hello.txt"}},
				"build_verification": map[string]any{"command": []string{"true"}},
				"worker":             map[string]any{"kind": "command", "command": []string{agentScript, "{prompt}", "{task_id}"}},
			}
			if tc.ralph {
				cfg["worker"].(map[string]any)["ralph"] = map[string]any{"enabled": true, "max_iterations": 4}
				t.Setenv("RALPH", "1")
			}
			data, err := json.Marshal(cfg)
			require.NoError(t, err)
			dir := testkit.Repo(t, map[string]string{".project-config.json": string(data), ".gitignore": ".runs\n", "PRODUCT.md": helloProduct})
			code, stdout, stderr := taskloom(t, "run", filepath.Join(dir, "PRODUCT.md"), "--repo", dir)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
			data, err = os.ReadFile(filepath.Join(dir, "hello.txt"))
			require.NoError(t, err)
			require.Equal(t, "hello from T1\n", string(data))
			require.Equal(t, []string{"1"}, trailers(t, dir)["T1"])
			noWorktreesLeft(t, dir)
		})
	}
}
