package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/tmc/langchaingo/llms"
)

func TestWritesFilesAndCompletes(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": "^Build the greeter", "replies": [
	  {"content": "I'll write the package.", "tool_calls": [
	    {"name": "write_to_file", "arguments": {"path": "greet/greet.go", "content": "package greet\n\nfunc Hello() string { return \"hi\" }\n"}},
	    {"name": "write_to_file", "arguments": {"path": "README.md", "content": "# greet\n"}}]},
	  {"tool_calls": [{"name": "apply_diff", "arguments": {"path": "greet/greet.go",
	    "diff": "<<<<<<< SEARCH\nfunc Hello() string { return \"hi\" }\n=======\nfunc Hello() string { return \"hello\" }\n>>>>>>> REPLACE"}}]},
	  {"tool_calls": [{"name": "read_file", "arguments": {"path": "greet/greet.go", "start_line": 3, "end_line": 3}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": "{\"result\": \"Added greet.Hello.\"}"}]}
	]}]}`, nil)

	res := e.run(t, "c1", "Build the greeter package.", "")

	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	require.Equal(t, "Added greet.Hello.", res.Completion)
	require.Equal(t, 4, res.Turns)
	require.Equal(t, []string{"README.md", "greet/greet.go"}, res.FilesChanged)
	require.Equal(t, "package greet\n\nfunc Hello() string { return \"hello\" }\n", readFile(t, filepath.Join(e.wt, "greet/greet.go")))
	require.Equal(t, 4, res.Usage.Calls)
	require.Positive(t, res.Usage.InputTokens)
	require.Equal(t, res.Usage, res.ByConversation["c1"])

	rec := e.load(t, "c1")
	requirePaired(t, rec)
	require.Equal(t, agent.StatusCompleted, rec.Meta.Status)
	require.Equal(t, "3 | func Hello() string { return \"hello\" }", resultFor(t, rec, 3).Content)
	require.Equal(t, []string{"task", "api_req", "text", "tool", "tool", "api_req", "tool", "api_req", "tool", "api_req", "tool", "completion_result"}, uiKinds(rec))
	// The API history alternates user and assistant, starting with the task.
	for i, m := range rec.API {
		want := agent.RoleUser
		if i%2 == 1 {
			want = agent.RoleAssistant
		}
		require.Equal(t, want, m.Role, "message %d", i)
	}
	// The model saw only this mode's tools, natively.
	require.Equal(t, 4, e.model.calls())
}

func TestMalformedJSONThenGoodRetry(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": "^Write a", "replies": [
	  {"tool_calls": [{"name": "write_to_file", "arguments": "{\"path\": \"a.go\", \"content\": \"package a\n"}]},
	  {"tool_calls": [{"name": "write_to_file", "arguments": "{\"path\": \"a.go\"}trailing"}]},
	  {"tool_calls": [{"name": "write_to_file", "arguments": {"path": "a.go", "content": "package a\n"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "wrote a.go"}}]}
	]}]}`, nil)

	res := e.run(t, "c1", "Write a.go", "")

	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	rec := e.load(t, "c1")
	requirePaired(t, rec)
	for i := range 2 {
		r := resultFor(t, rec, i)
		require.True(t, r.IsError)
		require.Contains(t, r.Content, "malformed JSON")
	}
	// The malformed arguments are kept verbatim, and the model is sent a
	// valid object in their place.
	uses := toolUses(rec)
	require.Nil(t, uses[0].Input)
	require.Equal(t, "{\"path\": \"a.go\", \"content\": \"package a\n", uses[0].RawInput)
	require.Contains(t, uiKinds(rec), agent.SayError)
	require.Equal(t, "package a\n", readFile(t, filepath.Join(e.wt, "a.go")))
	agent.RequireRequestPaired(t, e.model.last(), "")
}

func TestMalformedJSONCountsAsMistake(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": "^Write", "replies": [
	  {"tool_calls": [{"name": "write_to_file", "arguments": "{\"path\": 1"}]},
	  {"tool_calls": [{"name": "write_to_file", "arguments": "{\"path\": 2"}]},
	  {"tool_calls": [{"name": "write_to_file", "arguments": "not json"}]}
	]}]}`, &agent.Opts{MaxConsecutiveMistakes: 3})
	res := e.run(t, "c1", "Write it", "")
	require.Equal(t, agent.ReasonMistakeLimit, res.Reason)
	require.Equal(t, 3, res.Turns)
	entries, err := os.ReadDir(e.wt)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// callThenComplete is a script whose model makes the tool call call (a
// JSON object), then completes.
func callThenComplete(call string) string {
	return `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [` + call + `]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "ok"}}]}]}]}`
}

func TestToolNotAllowedInMode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, mode, call, wantErr string
		file                      string
	}{
		{"ask cannot write", agent.ModeAsk, `{"name": "write_to_file", "arguments": {"path": "a.go", "content": "x"}}`, "not allowed in ask mode", "a.go"},
		{"ask cannot run commands", agent.ModeAsk, `{"name": "execute_command", "arguments": {"command": "touch ran"}}`, "not allowed in ask mode", "ran"},
		{"architect edits only markdown", agent.ModeArchitect, `{"name": "write_to_file", "arguments": {"path": "main.go", "content": "x"}}`, "may only edit files matching \\.md$", "main.go"},
		{"orchestrator cannot read", agent.ModeOrchestrator, `{"name": "read_file", "arguments": {"path": "a"}}`, "not allowed in orchestrator mode", ""},
		{"unknown tool", agent.ModeCode, `{"name": "delete_everything", "arguments": {}}`, "unknown tool", ""},
		{"missing parameter", agent.ModeCode, `{"name": "write_to_file", "arguments": {"path": "b.go"}}`, "missing required parameter \"content\"", "b.go"},
		{"wrong type", agent.ModeCode, `{"name": "read_file", "arguments": {"path": 7}}`, "must be a string", ""},
		{"git folder", agent.ModeCode, `{"name": "write_to_file", "arguments": {"path": ".git/config", "content": "x"}}`, ".git folder", ".git/config"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, callThenComplete(tc.call), nil)
			res := e.run(t, "c1", "Do it", tc.mode)
			require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
			rec := e.load(t, "c1")
			r := resultFor(t, rec, 0)
			require.True(t, r.IsError)
			require.Contains(t, r.Content, tc.wantErr)
			if tc.file != "" {
				_, err := os.Stat(filepath.Join(e.wt, tc.file))
				require.ErrorIs(t, err, os.ErrNotExist, "a rejected call touched the disk")
			}
		})
	}
}

func TestArchitectMayEditMarkdown(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [{"name": "write_to_file", "arguments": {"path": "docs/plan.md", "content": "# Plan\n"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "planned"}}]}]}]}`, nil)
	res := e.run(t, "c1", "Plan it", agent.ModeArchitect)
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	require.Equal(t, "# Plan\n", readFile(t, filepath.Join(e.wt, "docs/plan.md")))
	// The native tools offered to the model are the mode's: no commands.
	sys := systemText(e.model.last())
	require.Contains(t, sys, "## write_to_file(")
	require.NotContains(t, sys, "## execute_command(")
}

func TestPathEscape(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.txt"), "top secret\n")
	cases := []struct {
		name    string
		prepare func(t *testing.T, wt string)
		call    string
		want    string
	}{
		{"dotdot read", nil, `{"name": "read_file", "arguments": {"path": "../secret.txt"}}`, "leaves the worktree"},
		{"dotdot write", nil, `{"name": "write_to_file", "arguments": {"path": "a/../../escape.txt", "content": "x"}}`, "leaves the worktree"},
		{"absolute", nil, `{"name": "read_file", "arguments": {"path": "/etc/passwd"}}`, "absolute paths are not allowed"},
		{"symlinked folder", func(t *testing.T, wt string) {
			require.NoError(t, os.Symlink(outside, filepath.Join(wt, "link")))
		}, `{"name": "write_to_file", "arguments": {"path": "link/escape.txt", "content": "x"}}`, "outside the worktree"},
		{"symlinked file", func(t *testing.T, wt string) {
			require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(wt, "secret")))
		}, `{"name": "read_file", "arguments": {"path": "secret"}}`, "outside the worktree"},
		{"dangling symlink", func(t *testing.T, wt string) {
			require.NoError(t, os.Symlink(filepath.Join(outside, "new.txt"), filepath.Join(wt, "dangling")))
		}, `{"name": "write_to_file", "arguments": {"path": "dangling", "content": "x"}}`, "dangling symlink"},
		{"symlinked folder in search", func(t *testing.T, wt string) {
			require.NoError(t, os.Symlink(outside, filepath.Join(wt, "link")))
		}, `{"name": "search_files", "arguments": {"path": "link", "regex": "secret"}}`, "outside the worktree"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, callThenComplete(tc.call), nil)
			if tc.prepare != nil {
				tc.prepare(t, e.wt)
			}
			res := e.run(t, "c1", "Do it", "")
			require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
			r := resultFor(t, e.load(t, "c1"), 0)
			require.True(t, r.IsError)
			require.Contains(t, r.Content, tc.want)
			require.NotContains(t, r.Content, "top secret")
			entries, err := os.ReadDir(outside)
			require.NoError(t, err)
			require.Len(t, entries, 1, "something was written outside the worktree")
			_, err = os.Stat(filepath.Join(filepath.Dir(e.wt), "escape.txt"))
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

func TestSymlinkInsideWorktreeIsAllowed(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [{"name": "read_file", "arguments": {"path": "alias/a.txt"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "ok"}}]}]}]}`, nil)
	writeFile(t, filepath.Join(e.wt, "real/a.txt"), "inside\n")
	require.NoError(t, os.Symlink(filepath.Join(e.wt, "real"), filepath.Join(e.wt, "alias")))
	e.run(t, "c1", "Read", "")
	r := resultFor(t, e.load(t, "c1"), 0)
	require.False(t, r.IsError, r.Content)
	require.Equal(t, "1 | inside", r.Content)
}

func TestRepetitionLoopStopped(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [{"name": "execute_command", "arguments": {"command": "echo x >> count"}}]},
	  {"tool_calls": [{"name": "execute_command", "arguments": {"command": "echo x >> count"}}]},
	  {"tool_calls": [{"name": "execute_command", "arguments": "{\"command\":   \"echo x >> count\"}"}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "never"}}]}]}]}`, &agent.Opts{RepetitionLimit: 3})
	res := e.run(t, "c1", "Loop", "")
	require.Equal(t, agent.ReasonRepetition, res.Reason)
	require.Equal(t, 3, res.Turns)
	// The third identical call (same arguments, other spacing) did not run.
	require.Equal(t, "x\nx\n", readFile(t, filepath.Join(e.wt, "count")))
	rec := e.load(t, "c1")
	requirePaired(t, rec)
	require.Contains(t, resultFor(t, rec, 2).Content, "3 times in a row")
	require.Equal(t, agent.StatusStopped, rec.Meta.Status)
}

func TestCompletionRefusedWithOpenTodos(t *testing.T) {
	t.Parallel()
	script := `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [{"name": "update_todo_list", "arguments": {"todos": [
	     {"id": "1", "content": "write a.go", "status": "completed"},
	     {"id": "2", "content": "write tests", "status": "pending"}]}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "early"}}]},
	  {"tool_calls": [{"name": "update_todo_list", "arguments": {"todos": [
	     {"id": "1", "content": "write a.go", "status": "completed"},
	     {"id": "2", "content": "write tests", "status": "completed"}]}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "all done"}}]}]}]}`

	e := setup(t, script, nil)
	res := e.run(t, "c1", "Work", "")
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	require.Equal(t, "all done", res.Completion)
	rec := e.load(t, "c1")
	refusal := resultFor(t, rec, 1)
	require.True(t, refusal.IsError)
	require.Contains(t, refusal.Content, "1 todo(s) are still open")
	require.Contains(t, refusal.Content, "write tests")
	require.Len(t, res.Todos, 2)

	// Configurable: with AllowOpenTodos the first attempt is accepted.
	e = setup(t, script, &agent.Opts{AllowOpenTodos: true})
	res = e.run(t, "c1", "Work", "")
	require.Equal(t, agent.ReasonCompleted, res.Reason)
	require.Equal(t, "early", res.Completion)
}

func TestCompletionRefusedAfterFailedToolInSameTurn(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [
	    {"name": "execute_command", "arguments": {"command": "exit 3"}},
	    {"name": "attempt_completion", "arguments": {"result": "tests pass"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "fixed"}}]}]}]}`, nil)
	res := e.run(t, "c1", "Work", "")
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	require.Equal(t, "fixed", res.Completion)
	rec := e.load(t, "c1")
	require.Contains(t, resultFor(t, rec, 0).Content, "Exit code: 3")
	require.Contains(t, resultFor(t, rec, 1).Content, "a tool call failed earlier in this turn")
}

func TestNoToolCallIsAMistakeThenRecovers(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"content": "I think it is done."},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`, nil)
	res := e.run(t, "c1", "Work", "")
	require.Equal(t, agent.ReasonCompleted, res.Reason)
	rec := e.load(t, "c1")
	require.Contains(t, rec.API[2].Content[0].Text, "You did not use a tool")
}

func TestQuestionEndsLoopAndResumeAnswers(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [{"name": "ask_followup_question", "arguments": {"question": "Which port?"}}]},
	  {"tool_calls": [{"name": "write_to_file", "arguments": {"path": "port.txt", "content": "8080\n"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "port set"}}]}]}]}`, nil)
	res := e.run(t, "c1", "Configure the server", "")
	require.Equal(t, agent.ReasonQuestion, res.Reason)
	require.Equal(t, "Which port?", res.Question)
	rec := e.load(t, "c1")
	require.Equal(t, agent.StatusQuestion, rec.Meta.Status)
	require.Equal(t, "ask:followup", uiKinds(rec)[len(rec.UI)-1])

	res, err := e.agent.Resume(context.Background(), "c1", &agent.ResumeOpts{Answer: "8080"})
	require.NoError(t, err)
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	rec = e.load(t, "c1")
	requirePaired(t, rec)
	require.Equal(t, "Answer: 8080", resultFor(t, rec, 0).Content)
}

func TestLimits(t *testing.T) {
	t.Parallel()
	loop := `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [{"name": "list_files", "arguments": {"path": "."}}]},
	  {"tool_calls": [{"name": "list_files", "arguments": {"path": ".", "recursive": true}}]},
	  {"tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`
	t.Run("max turns", func(t *testing.T) {
		t.Parallel()
		e := setup(t, loop, &agent.Opts{MaxTurns: 2})
		res := e.run(t, "c1", "Work", "")
		require.Equal(t, agent.ReasonMaxTurns, res.Reason)
		require.Equal(t, 2, res.Turns)
	})
	t.Run("token budget", func(t *testing.T) {
		t.Parallel()
		e := setup(t, loop, &agent.Opts{MaxTokens: 1})
		res := e.run(t, "c1", "Work", "")
		require.Equal(t, agent.ReasonBudget, res.Reason)
		require.Equal(t, 1, res.Turns)
		require.Contains(t, res.Detail, "token budget")
	})
	t.Run("cost budget", func(t *testing.T) {
		t.Parallel()
		e := setup(t, loop, &agent.Opts{MaxCostUSD: 0.01, Pricing: agent.Pricing{InputPerMTok: 10000}})
		res := e.run(t, "c1", "Work", "")
		require.Equal(t, agent.ReasonBudget, res.Reason)
		require.Greater(t, res.Usage.CostUSD, 0.01)
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		e := setup(t, loop, nil)
		ctx, cancel := context.WithCancel(context.Background())
		e.model.cancelAt, e.model.cancel = 2, cancel
		res, err := e.agent.Run(ctx, agent.Request{ID: "c1", Task: "Work", Worktree: e.wt})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, agent.ReasonCancelled, res.Reason)
		rec := e.load(t, "c1")
		require.Equal(t, agent.ReasonCancelled, rec.Meta.Reason)
		require.Equal(t, 1, rec.Meta.Turns)
	})
}

func TestExecuteCommand(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [{"name": "execute_command", "arguments": {"command": "pwd; echo $TASKLOOM_TEST_API_KEY; i=0; while [ $i -lt 3000 ]; do echo line$i; i=$((i+1)); done"}}]},
	  {"tool_calls": [{"name": "execute_command", "arguments": {"command": "sleep 30", "timeout_seconds": 1}}]},
	  {"tool_calls": [{"name": "execute_command", "arguments": {"command": "git push origin main"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`,
		&agent.Opts{OutputLimit: 2000, CommandPolicy: agent.CommandPolicy{Deny: []string{"git push"}},
			ConfineFunc: func(string) (proc.Confinement, error) {
				env := []string{"PATH=" + os.Getenv("PATH"), "TASKLOOM_TEST_API_KEY=sk-test-0123456789"}
				return proc.Confinement{Env: env, Redactor: proc.NewRedactor(env, []string{"PATH"})}, nil
			}})
	res := e.run(t, "c1", "Work", "")
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	rec := e.load(t, "c1")

	out := resultFor(t, rec, 0).Content
	real, err := filepath.EvalSymlinks(e.wt)
	require.NoError(t, err)
	require.Contains(t, out, "Exit code: 0")
	require.Contains(t, out, real, "the command runs in the worktree")
	require.Contains(t, out, "line0\n")
	require.NotContains(t, out, "sk-test-0123456789", "a secret the command printed is redacted")
	require.Contains(t, out, "[REDACTED]")
	require.Contains(t, out, "line2999")
	require.Contains(t, out, "bytes omitted")
	require.Less(t, len(out), 2200)

	require.Contains(t, resultFor(t, rec, 1).Content, "timed out after 1s")
	denied := resultFor(t, rec, 2)
	require.True(t, denied.IsError)
	require.Contains(t, denied.Content, "denied by the command policy")
}

func TestSearchAndList(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [
	    {"name": "search_files", "arguments": {"path": ".", "regex": "func [A-Z]", "file_pattern": "*.go"}},
	    {"name": "list_files", "arguments": {"path": "."}},
	    {"name": "list_files", "arguments": {"path": ".", "recursive": true}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`, nil)
	writeFile(t, filepath.Join(e.wt, "a/a.go"), "package a\n\nfunc A() {}\nfunc b() {}\n")
	writeFile(t, filepath.Join(e.wt, "a/a.txt"), "func Z()\n")
	writeFile(t, filepath.Join(e.wt, ".git/HEAD"), "func X()\n")
	e.run(t, "c1", "Look", "")
	rec := e.load(t, "c1")
	require.Equal(t, "1 matches:\na/a.go:3: func A() {}", resultFor(t, rec, 0).Content)
	require.Equal(t, "a/", resultFor(t, rec, 1).Content)
	require.Equal(t, "a/\na/a.go\na/a.txt", resultFor(t, rec, 2).Content)
}

func TestToolsOfferedNatively(t *testing.T) {
	t.Parallel()
	var seen []llms.Tool
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`, nil)
	inner := e.model.inner
	e.model.inner = modelFunc(func(ctx context.Context, msgs []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
		var o llms.CallOptions
		for _, opt := range options {
			opt(&o)
		}
		seen = o.Tools
		return inner.GenerateContent(ctx, msgs, options...)
	})
	e.run(t, "c1", "Work", agent.ModeOrchestrator)
	var names []string
	for _, tool := range seen {
		names = append(names, tool.Function.Name)
	}
	require.Equal(t, []string{"update_todo_list", "new_task", "attempt_completion", "ask_followup_question"}, names)
}

type modelFunc func(ctx context.Context, msgs []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error)

func (f modelFunc) GenerateContent(ctx context.Context, msgs []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	return f(ctx, msgs, options...)
}

func (f modelFunc) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, f, prompt, options...)
}

func TestCustomMode(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [
	    {"name": "write_to_file", "arguments": {"path": "a_test.go", "content": "package a\n"}},
	    {"name": "write_to_file", "arguments": {"path": "a.go", "content": "package a\n"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`,
		&agent.Opts{CustomModes: []agent.Mode{{Slug: "tester", Role: "You write tests only.", Groups: []string{"read", "edit"},
			FileRegex: `_test\.go$`, FileRegexDescription: "Go test files"}}})
	res := e.run(t, "c1", "Write tests", "tester")
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	rec := e.load(t, "c1")
	require.False(t, resultFor(t, rec, 0).IsError)
	require.Contains(t, resultFor(t, rec, 1).Content, "Go test files")
	require.True(t, strings.HasPrefix(systemText(e.model.last()), "You write tests only."))

	_, err := agent.New(e.model, agent.NewMemoryStore(), &agent.Opts{CustomModes: []agent.Mode{{Slug: "Bad Slug", Role: "x"}}})
	require.ErrorContains(t, err, "custom_modes[0].slug")
	_, err = agent.New(e.model, agent.NewMemoryStore(), &agent.Opts{CustomModes: []agent.Mode{{Slug: "x", Role: "x", Groups: []string{"browser"}}}})
	require.ErrorContains(t, err, "unknown group")
}

// Credentials in files reach neither the model nor the history: read_file
// and search_files hide them in what they read, before numbering and
// cutting it, a key of several lines too. Other values the sandbox keeps
// from commands are left in the files, which the worker edits from what
// it read.
func TestSecretsRedactedFromFileTools(t *testing.T) {
	t.Parallel()
	const pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----"
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [
	    {"name": "read_file", "arguments": {"path": ".env"}},
	    {"name": "search_files", "arguments": {"path": ".", "regex": "API_KEY|MII"}},
	    {"name": "read_file", "arguments": {"path": "key.pem"}},
	    {"name": "read_file", "arguments": {"path": "long.txt"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`,
		&agent.Opts{OutputLimit: 120, ConfineFunc: func(string) (proc.Confinement, error) {
			env := []string{"PATH=" + os.Getenv("PATH"), "TASKLOOM_TEST_API_KEY=sk-test-0123456789", "TLS_KEY=" + pem, "DEBIAN_FRONTEND=noninteractive"}
			return proc.Confinement{Env: env, Redactor: proc.NewRedactor(env, []string{"PATH"})}, nil
		}})
	writeFile(t, filepath.Join(e.wt, ".env"), "TASKLOOM_TEST_API_KEY=sk-test-0123456789\nDEBIAN_FRONTEND=noninteractive\n")
	writeFile(t, filepath.Join(e.wt, "key.pem"), pem+"\n")
	writeFile(t, filepath.Join(e.wt, "long.txt"), strings.Repeat("x", 100)+"sk-test-0123456789\n")
	res := e.run(t, "c1", "Look", "")
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	rec := e.load(t, "c1")
	require.Equal(t, "1 | TASKLOOM_TEST_API_KEY=[REDACTED]\n2 | DEBIAN_FRONTEND=noninteractive", resultFor(t, rec, 0).Content,
		"a credential is hidden; the rest is the file as it is")
	require.Contains(t, resultFor(t, rec, 1).Content, "TASKLOOM_TEST_API_KEY=[REDACTED]")
	require.Equal(t, "1 | [REDACTED]", resultFor(t, rec, 2).Content, "a key of several lines")
	require.NotContains(t, resultFor(t, rec, 3).Content, "sk-test", "hidden before the result is cut")
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	for _, secret := range []string{"sk-test-0123456789", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"} {
		require.NotContains(t, string(data), secret, "the history, UI messages included")
	}
}

// A worktree whose confinement cannot be had withholds the results, but
// what the calls did stands: a completion still ends the conversation.
func TestResultsWithheldKeepTheEnding(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": ".", "replies": [
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`,
		&agent.Opts{ConfineFunc: func(string) (proc.Confinement, error) { return proc.Confinement{}, errors.New("no sandbox here") }})
	res := e.run(t, "c1", "Finish", "")
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
}
