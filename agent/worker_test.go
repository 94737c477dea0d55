package agent_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/planner"
)

func job(t *testing.T) agent.Job {
	t.Helper()
	return agent.Job{
		RunID: "run-1",
		Task: planner.Task{
			ID: "T1", Title: "Add a greeting", UserStory: "As a user I want a greeting.",
			AcceptanceCriteria: []string{"Hello returns hello"},
			FilesToCreate:      []string{"greet.go"}, TestFiles: []string{"greet_test.go"},
			MaxAttempts: 3,
		},
		Attempt:  1,
		Worktree: t.TempDir(),
	}
}

func TestBuildPromptContract(t *testing.T) {
	t.Parallel()
	j := job(t)
	j.PreviousError = "--- FAIL: TestHello\n"
	j.ReviewerNote = "use fmt"
	got := agent.BuildPrompt(j)
	lines := strings.Split(got, "\n")
	require.Equal(t, "Task: T1 — Add a greeting", lines[0])
	require.Equal(t, "Attempt: 1 of 3", lines[1])
	// The documented example regex matches it.
	require.Regexp(t, regexp.MustCompile(`Task: T1\b[\s\S]*Attempt: 1 of`), got)
	for _, want := range []string{"User story: As a user I want a greeting.", "- Hello returns hello",
		"Files to create: greet.go", "Test files: greet_test.go", "--- FAIL: TestHello", "Note from the reviewer: use fmt"} {
		require.Contains(t, got, want)
	}
	require.NotContains(t, got, "previous attempt's changes are not in this worktree", "the worktree is the attempt's own")
	// A new attempt's worktree holds none of the last one's work.
	j.Restart = true
	require.Contains(t, agent.BuildPrompt(j), "the previous attempt's changes are not in this worktree")
	j.Iteration = 2
	require.NotContains(t, agent.BuildPrompt(j), "previous attempt's changes", "a Ralph iteration keeps the worktree")
}

func TestAgentWorker(t *testing.T) {
	t.Parallel()
	m := scripted(t, `{"conversations": [{"match": "Task: T1\\b[\\s\\S]*Attempt: 1 of 3", "replies": [
	  {"content": "Writing.", "tool_calls": [{"name": "write_to_file", "arguments": {"path": "greet.go", "content": "package greet\n"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": "{\"result\": \"greet.go added\"}"}]}]}]}`)
	store := agent.NewMemoryStore()
	a, err := agent.New(m, store, &agent.Opts{Skills: &agent.SkillsOpts{NoGlobal: true}, Pricing: agent.Pricing{InputPerMTok: 3, OutputPerMTok: 15}})
	require.NoError(t, err)
	acct := agent.NewAccounting()
	w := agent.NewAgentWorker(a, &agent.AgentWorkerOpts{Accounting: acct})
	j := job(t)

	out, err := w.Implement(context.Background(), j)
	require.NoError(t, err)
	require.Equal(t, agent.OutcomeDone, out.Status, out.Detail)
	require.Equal(t, "greet.go added", out.Summary)
	require.Equal(t, "run-1/T1/1", out.ConversationID)
	require.Equal(t, []string{"greet.go"}, out.FilesChanged)
	require.Equal(t, 2, out.Usage.Calls)
	require.Positive(t, out.Usage.CostUSD)
	require.Equal(t, out.Usage, acct.Conversation("run-1/T1/1"))
	require.Equal(t, out.Usage, acct.Task("run-1", "T1"))
	require.Equal(t, out.Usage, acct.Run("run-1"))

	// Idempotent: the same attempt again returns the stored outcome
	// without calling the model or counting twice.
	again, err := w.Implement(context.Background(), j)
	require.NoError(t, err)
	require.Equal(t, out, again)
	require.Equal(t, 2, m.calls())
	require.Equal(t, out.Usage, acct.Run("run-1"))

	// Another attempt (the task's second toward max_attempts) does not
	// match the script: the scripted model's error ends the conversation
	// with ReasonError.
	j.Attempt, j.Task.Attempts = 2, 1
	out, err = w.Implement(context.Background(), j)
	require.Error(t, err)
	require.Equal(t, agent.OutcomeIncomplete, out.Status)
	require.Equal(t, agent.ReasonError, out.AgentReason)
	require.Contains(t, out.Detail, "no conversation regex matched")
}

func TestAgentWorkerQuestionAnsweredByReviewerNote(t *testing.T) {
	t.Parallel()
	m := scripted(t, `{"conversations": [{"match": "Task: T1", "replies": [
	  {"tool_calls": [{"name": "ask_followup_question", "arguments": {"question": "Formal or casual?"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "casual it is"}}]}]}]}`)
	a, err := agent.New(m, agent.NewMemoryStore(), &agent.Opts{Skills: &agent.SkillsOpts{NoGlobal: true}})
	require.NoError(t, err)
	w := agent.NewAgentWorker(a, nil)
	j := job(t)
	out, err := w.Implement(context.Background(), j)
	require.NoError(t, err)
	require.Equal(t, agent.OutcomeQuestion, out.Status)
	require.Equal(t, "Formal or casual?", out.Question)

	j.ReviewerNote = "casual"
	out, err = w.Implement(context.Background(), j)
	require.NoError(t, err)
	require.Equal(t, agent.OutcomeDone, out.Status)
	require.Equal(t, "casual it is", out.Summary)
}

// fakeAgentCLI is a small agent CLI: it reads its prompt from $1, writes a
// file in the current directory and prints claude -p JSON.
const fakeAgentCLI = `#!/bin/sh
prompt="$1"
task="$2"
case "$prompt" in
  *"Task: T1 — Add a greeting"*) ;;
  *) echo "bad prompt" >&2; exit 9 ;;
esac
echo "progress on stderr" >&2
printf 'package greet\n' > greet.go
echo "$task $3" > args.txt
cat <<'EOF'
{"type":"result","subtype":"success","is_error":false,"result":"Implemented greet.go","session_id":"sess-42","total_cost_usd":0.0123,"num_turns":3,"usage":{"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":5}}
EOF
`

// writeScript writes a shell script and returns the command that runs it:
// through sh, since a file just written may not be executed while another
// test's fork still holds it open for writing ("text file busy").
func writeScript(t *testing.T, body string) []string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o755))
	return []string{"sh", p}
}

func TestCommandWorker(t *testing.T) {
	t.Parallel()
	acct := agent.NewAccounting()
	w, err := agent.NewCommandWorker(agent.CommandWorkerOpts{
		Argv:       append(writeScript(t, fakeAgentCLI), "{prompt}", "{task_id}", "{worktree}"),
		Accounting: acct,
	})
	require.NoError(t, err)
	j := job(t)
	out, err := w.Implement(context.Background(), j)
	require.NoError(t, err)
	require.Equal(t, agent.OutcomeDone, out.Status, out.Detail)
	require.Equal(t, "Implemented greet.go", out.Summary)
	require.Equal(t, "sess-42", out.SessionID)
	require.Equal(t, 0, *out.ExitCode)
	require.InDelta(t, 0.0123, out.Usage.CostUSD, 1e-9)
	require.Equal(t, 105, out.Usage.InputTokens)
	require.Equal(t, 20, out.Usage.OutputTokens)
	require.InDelta(t, 0.0123, acct.Task("run-1", "T1").CostUSD, 1e-9)
	require.Contains(t, out.Output, "progress on stderr")
	require.Equal(t, "package greet\n", readFile(t, filepath.Join(j.Worktree, "greet.go")), "it runs in the worktree")
	require.Equal(t, "T1 "+j.Worktree+"\n", readFile(t, filepath.Join(j.Worktree, "args.txt")))
}

func TestCommandWorkerFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, script string
		timeout      time.Duration
		status       agent.OutcomeStatus
		detail       string
		exit         int
	}{
		{"exit code", "#!/bin/sh\necho 'plain text output'\nexit 2\n", 0, agent.OutcomeIncomplete, "exit code 2", 2},
		{"blocked", "#!/bin/sh\necho 'I need credentials.'\necho '<promise>BLOCKED</promise>'\n", 0, agent.OutcomeQuestion, "BLOCKED", 0},
		{"cli error", "#!/bin/sh\necho '{\"type\":\"result\",\"subtype\":\"error_max_turns\",\"is_error\":true,\"result\":\"\"}'\n", 0, agent.OutcomeIncomplete, "error_max_turns", 0},
		{"timeout", "#!/bin/sh\nsleep 30 &\nwait\n", 300 * time.Millisecond, agent.OutcomeIncomplete, "timed out", -1},
		{"plain done", "#!/bin/sh\necho 'all good'\n", 0, agent.OutcomeDone, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w, err := agent.NewCommandWorker(agent.CommandWorkerOpts{Argv: writeScript(t, tc.script), Timeout: tc.timeout})
			require.NoError(t, err)
			out, err := w.Implement(context.Background(), job(t))
			require.NoError(t, err)
			require.Equal(t, tc.status, out.Status)
			require.Contains(t, out.Detail, tc.detail)
			if tc.status == agent.OutcomeQuestion {
				require.Equal(t, "I need credentials.", out.Question)
			}
			require.Equal(t, tc.exit, *out.ExitCode)
			// Output that is not the CLI's JSON tells nothing of what
			// its calls used: the usage says so rather than read as 0.
			require.True(t, out.Usage.Unreported, "usage of %q", tc.script)
		})
	}
	_, err := agent.NewCommandWorker(agent.CommandWorkerOpts{})
	require.ErrorContains(t, err, "worker.command")
}

func TestParseCLIOutput(t *testing.T) {
	t.Parallel()
	stream := `{"type":"system","subtype":"init","session_id":"s1"}
{"type":"assistant","message":{"content":[]}}
{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s1","cost_usd":0.5}`
	got, ok := agent.ParseCLIOutput(stream)
	require.True(t, ok)
	require.Equal(t, "done", got.Result)
	require.Equal(t, "s1", got.SessionID)
	require.InDelta(t, 0.5, got.CostUSD, 1e-9)

	_, ok = agent.ParseCLIOutput("no json here\n")
	require.False(t, ok)
	_, ok = agent.ParseCLIOutput(`{"unrelated": true}`)
	require.False(t, ok)
}

// dirDiff reports a worktree's content, as a DiffFunc: any change to any
// file changes it.
func dirDiff(ctx context.Context, dir string) (string, error) {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, fmt.Sprintf("%s %x", rel, sha256.Sum256(data)))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n"), err
}

// testsPass passes when the worktree has a file named "fixed".
func testsPass(ctx context.Context, job agent.Job) (bool, string, error) {
	dir := job.Worktree
	if _, err := os.Stat(filepath.Join(dir, "fixed")); err == nil {
		return true, "ok", nil
	}
	return false, "FAIL: fixed is missing", nil
}

// runRalph runs the Ralph loop around inner with opts on a new job, the
// tests' testsPass and dirDiff deciding, and returns its outcome.
func runRalph(t *testing.T, inner agent.Worker, opts agent.RalphOpts) agent.Outcome {
	t.Helper()
	opts.TestsPassFunc, opts.DiffFunc = testsPass, dirDiff
	r, err := agent.NewRalph(inner, opts)
	require.NoError(t, err)
	out, err := r.Implement(context.Background(), job(t))
	require.NoError(t, err)
	return out
}

func TestRalphFinishes(t *testing.T) {
	t.Parallel()
	// The shell agent counts its iterations in the worktree. It claims
	// DONE on iteration 2 before the tests pass (ignored), fixes the code
	// on iteration 3 and claims DONE again.
	script := `#!/bin/sh
n=$(cat iter 2>/dev/null || echo 0); n=$((n+1)); echo $n > iter
case "$1" in *"Iteration: $n"*) ;; *) echo "missing iteration line"; exit 7 ;; esac
if [ $n -ge 3 ]; then touch fixed; fi
if [ $n -ge 2 ]; then echo "Work done."; echo "<promise>DONE</promise>"; fi
`
	inner, err := agent.NewCommandWorker(agent.CommandWorkerOpts{Argv: append(writeScript(t, script), "{prompt}")})
	require.NoError(t, err)
	var prompts []string
	spy := agent.WorkerFunc(func(ctx context.Context, j agent.Job) (agent.Outcome, error) {
		prompts = append(prompts, agent.BuildPrompt(j))
		return inner.Implement(ctx, j)
	})
	out := runRalph(t, spy, agent.RalphOpts{MaxIterations: 5})
	require.Equal(t, agent.OutcomeDone, out.Status, out.Detail)
	require.Equal(t, 3, out.Iterations)
	require.Contains(t, prompts[0], "<promise>DONE</promise>")
	require.Contains(t, prompts[2], "claimed completion, but the tests fail:\nFAIL: fixed is missing")
}

func TestRalphBlocks(t *testing.T) {
	t.Parallel()
	calls := 0
	inner := agent.WorkerFunc(func(ctx context.Context, j agent.Job) (agent.Outcome, error) {
		calls++
		require.NoError(t, os.WriteFile(filepath.Join(j.Worktree, fmt.Sprint(calls)), nil, 0o644))
		if calls == 2 {
			return agent.Outcome{Status: agent.OutcomeDone, Summary: "I need an API key.\n<promise>BLOCKED</promise>\n"}, nil
		}
		return agent.Outcome{Status: agent.OutcomeIncomplete, Summary: "Remember: print <promise>DONE</promise> when done."}, nil
	})
	out := runRalph(t, inner, agent.RalphOpts{})
	// Blocked is a question for a person, in the worker's words.
	require.Equal(t, agent.OutcomeQuestion, out.Status)
	require.Equal(t, "I need an API key.", out.Question)
	require.Equal(t, 2, out.Iterations)
	require.Contains(t, out.Detail, "BLOCKED")
}

func TestRalphStagnates(t *testing.T) {
	t.Parallel()
	script := "#!/bin/sh\necho 'thinking about it'\nexit 1\n"
	inner, err := agent.NewCommandWorker(agent.CommandWorkerOpts{Argv: writeScript(t, script)})
	require.NoError(t, err)
	out := runRalph(t, inner, agent.RalphOpts{MaxIterations: 10, StagnationLimit: 3})
	require.Equal(t, agent.OutcomeBlocked, out.Status)
	require.Equal(t, 3, out.Iterations)
	require.Contains(t, out.Detail, "stagnating")
}

func TestRalphMaxIterations(t *testing.T) {
	t.Parallel()
	n := 0
	inner := agent.WorkerFunc(func(ctx context.Context, j agent.Job) (agent.Outcome, error) {
		n++
		require.NoError(t, os.WriteFile(filepath.Join(j.Worktree, "progress"), []byte(fmt.Sprint(n)), 0o644))
		return agent.Outcome{Status: agent.OutcomeIncomplete, Usage: agent.Usage{Calls: 1}}, nil
	})
	out := runRalph(t, inner, agent.RalphOpts{MaxIterations: 4})
	require.Equal(t, agent.OutcomeIncomplete, out.Status)
	require.Equal(t, 4, out.Iterations)
	require.Equal(t, 4, out.Usage.Calls)
	require.Contains(t, out.Detail, "max_iterations")

	_, err := agent.NewRalph(inner, agent.RalphOpts{})
	require.ErrorContains(t, err, "TestsPassFunc")
}

func TestAgentWorkerResumesOrRestartsAnInterruptedAttempt(t *testing.T) {
	t.Parallel()
	const script = `{"conversations": [{"match": "Task: T1", "replies": [
	  {"tool_calls": [{"name": "write_to_file", "arguments": {"path": "greet.go", "content": "package greet\n"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			t.Parallel()
			m := scripted(t, script)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m.cancelAt, m.cancel = 2, cancel // killed before the second turn
			store := agent.NewMemoryStore()
			a, err := agent.New(m, store, &agent.Opts{Skills: &agent.SkillsOpts{NoGlobal: true}})
			require.NoError(t, err)
			w := agent.NewAgentWorker(a, nil)
			j := job(t)
			_, err = w.Implement(ctx, j)
			require.ErrorIs(t, err, context.Canceled)

			if restart {
				// The pipeline recreated the worktree: greet.go is gone.
				require.NoError(t, os.Remove(filepath.Join(j.Worktree, "greet.go")))
			}
			j.Restart = restart
			out, err := w.Implement(context.Background(), j)
			require.NoError(t, err)
			require.Equal(t, agent.OutcomeDone, out.Status, out.Detail)
			require.Equal(t, "package greet\n", readFile(t, filepath.Join(j.Worktree, "greet.go")))
			rec, err := store.Load(context.Background(), "run-1/T1/1")
			require.NoError(t, err)
			if restart {
				require.Equal(t, 4, m.calls(), "started over: two more calls")
				require.Equal(t, 2, rec.Meta.Turns)
			} else {
				require.Equal(t, 3, m.calls(), "resumed: one more call")
				require.Equal(t, 2, rec.Meta.Turns)
				require.Equal(t, 2, out.Usage.Calls)
			}
		})
	}
}

// TestRalphIterationConversations: with a conversation ID set by the
// pipeline, each iteration gets a conversation of its own.
func TestRalphIterationConversations(t *testing.T) {
	t.Parallel()
	var ids []string
	inner := agent.WorkerFunc(func(_ context.Context, j agent.Job) (agent.Outcome, error) {
		ids = append(ids, j.ConversationID)
		return agent.Outcome{Status: agent.OutcomeIncomplete}, nil
	})
	r, err := agent.NewRalph(inner, agent.RalphOpts{MaxIterations: 3, TestsPassFunc: testsPass})
	require.NoError(t, err)
	j := job(t)
	j.ConversationID = agent.ConversationID("r1", j.Task.ID, 4, 0)
	_, err = r.Implement(context.Background(), j)
	require.NoError(t, err)
	require.Equal(t, []string{
		agent.ConversationID("r1", j.Task.ID, 4, 1),
		agent.ConversationID("r1", j.Task.ID, 4, 2),
		agent.ConversationID("r1", j.Task.ID, 4, 3),
	}, ids)
}
