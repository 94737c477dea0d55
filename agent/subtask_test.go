package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/taskloom/taskloom/agent"
	"github.com/tmc/langchaingo/llms"
)

// subtaskScript: an orchestrator delegates b.go to a code-mode subtask and
// completes with its result.
const subtaskScript = `{"conversations": [
  {"match": "^Subtask: write b.go", "replies": [
    {"tool_calls": [{"name": "write_to_file", "arguments": {"path": "b.go", "content": "package b\n"}}]},
    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "b.go written"}}]}]},
  {"match": "^Orchestrate", "replies": [
    {"tool_calls": [
      {"name": "update_todo_list", "arguments": {"todos": [{"id": "1", "content": "delegate b.go", "status": "in_progress"}]}},
      {"name": "new_task", "arguments": {"mode": "code", "message": "Subtask: write b.go with package b."}}]},
    {"tool_calls": [{"name": "update_todo_list", "arguments": {"todos": [{"id": "1", "content": "delegate b.go", "status": "completed"}]}}]},
    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "delegated and done"}}]}]}
]}`

func TestSubtaskResultReachesParent(t *testing.T) {
	t.Parallel()
	e := setup(t, subtaskScript, nil)
	res := e.run(t, "p", "Orchestrate the work.", agent.ModeOrchestrator)

	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	require.Equal(t, "delegated and done", res.Completion)
	require.Equal(t, []string{"p.1"}, res.ChildIDs)
	require.Equal(t, []string{"b.go"}, res.FilesChanged)
	require.Equal(t, "package b\n", readFile(t, filepath.Join(e.wt, "b.go")))
	require.Len(t, res.ByConversation, 2)
	require.Equal(t, 2, res.ByConversation["p.1"].Calls)
	require.Equal(t, 3, res.ByConversation["p"].Calls)
	require.Equal(t, 5, res.Usage.Calls)

	parent := e.load(t, "p")
	requirePaired(t, parent)
	got := resultFor(t, parent, 1) // the new_task call
	require.False(t, got.IsError)
	require.Contains(t, got.Content, "b.go written")
	require.Nil(t, parent.Meta.PendingChild)
	require.Equal(t, 2, parent.Meta.SubtaskUsage.Calls)
	require.Contains(t, uiKinds(parent), agent.SaySubtaskResult)

	child := e.load(t, "p.1")
	require.Equal(t, "p", child.Meta.ParentID)
	require.Equal(t, "p", child.Meta.RootID)
	require.Equal(t, agent.ModeCode, child.Meta.Mode)
	require.Equal(t, 1, child.Meta.Depth)
	require.Equal(t, agent.StatusCompleted, child.Meta.Status)
	// The child has its own history, starting with the delegated message.
	require.Equal(t, "Subtask: write b.go with package b.", child.API[0].Content[0].Text)
}

func TestSubtaskSurvivesRestart(t *testing.T) {
	t.Parallel()
	storeDir := t.TempDir()
	wt := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// First process: killed during the child's second model call (call 3:
	// parent 1, child 1, child 2).
	m1 := scripted(t, subtaskScript)
	m1.cancelAt, m1.cancel = 3, cancel
	a1, err := agent.New(m1, agent.NewFileStore(storeDir), &agent.Opts{Skills: &agent.SkillsOpts{NoGlobal: true}})
	require.NoError(t, err)
	res, err := a1.Run(ctx, agent.Request{ID: "run-1/T1/1", Task: "Orchestrate the work.", Worktree: wt, Mode: agent.ModeOrchestrator})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, agent.ReasonCancelled, res.Reason)

	store := agent.NewFileStore(storeDir)
	parent, err := store.Load(context.Background(), "run-1/T1/1")
	require.NoError(t, err)
	require.NotNil(t, parent.Meta.PendingChild, "the parent records the child it waits for")
	require.Equal(t, "run-1/T1/1.1", parent.Meta.PendingChild.ChildID)
	child, err := store.Load(context.Background(), "run-1/T1/1.1")
	require.NoError(t, err)
	require.Equal(t, "run-1/T1/1", child.Meta.ParentID)
	require.Equal(t, 1, child.Meta.Turns)

	// Second process: a new agent and store on the same folder.
	m2 := scripted(t, subtaskScript)
	a2, err := agent.New(m2, agent.NewFileStore(storeDir), &agent.Opts{Skills: &agent.SkillsOpts{NoGlobal: true}})
	require.NoError(t, err)
	res, err = a2.Resume(context.Background(), "run-1/T1/1", nil)
	require.NoError(t, err)
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	require.Equal(t, "delegated and done", res.Completion)

	// The child resumed where it was (one more call), then the parent
	// continued (two more calls).
	require.Equal(t, 3, m2.calls())
	require.Equal(t, "Subtask: write b.go with package b.", firstUserText(m2.reqs[0]))
	require.True(t, strings.HasPrefix(firstUserText(m2.reqs[1]), "Orchestrate"))
	parent, err = store.Load(context.Background(), "run-1/T1/1")
	require.NoError(t, err)
	requirePaired(t, parent)
	require.Contains(t, resultFor(t, parent, 1).Content, "b.go written")
	child, err = store.Load(context.Background(), "run-1/T1/1.1")
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, child.Meta.Status)
	require.Equal(t, 2, child.Meta.Turns)
	require.Equal(t, 5, res.Usage.Calls, "usage counts both processes' calls once")

	// A completed conversation resumes to its result without a model call.
	res, err = a2.Resume(context.Background(), "run-1/T1/1", nil)
	require.NoError(t, err)
	require.Equal(t, agent.ReasonCompleted, res.Reason)
	require.Equal(t, 3, m2.calls())
}

func TestSubtaskQuestionEscalatesThroughParent(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [
	  {"match": "^Child", "replies": [
	    {"tool_calls": [{"name": "ask_followup_question", "arguments": {"question": "Which database?"}}]},
	    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "using sqlite"}}]}]},
	  {"match": "^Parent", "replies": [
	    {"tool_calls": [{"name": "new_task", "arguments": {"mode": "ask", "message": "Child: pick a database"}}]},
	    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "parent done"}}]}]}]}`, nil)
	res := e.run(t, "p", "Parent task", agent.ModeOrchestrator)
	require.Equal(t, agent.ReasonQuestion, res.Reason)
	require.Equal(t, "Which database?", res.Question)
	require.NotNil(t, e.load(t, "p").Meta.PendingChild)

	res, err := e.agent.Resume(context.Background(), "p", &agent.ResumeOpts{Answer: "sqlite"})
	require.NoError(t, err)
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	child := e.load(t, "p.1")
	require.Equal(t, "Answer: sqlite", resultFor(t, child, 0).Content)
	require.Contains(t, resultFor(t, e.load(t, "p"), 0).Content, "using sqlite")
}

func TestSubtaskDepthIsBounded(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [
	  {"match": "^Nested", "replies": [
	    {"tool_calls": [{"name": "new_task", "arguments": {"mode": "code", "message": "Nested again"}}]},
	    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "nested done"}}]}]}]}`,
		&agent.Opts{MaxSubtaskDepth: 1})
	res := e.run(t, "p", "Nested start", "")
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	child := e.load(t, "p.1")
	r := resultFor(t, child, 0)
	require.True(t, r.IsError)
	require.Contains(t, r.Content, "nested at most 1 deep")
}

func TestCondensation(t *testing.T) {
	t.Parallel()
	// The summary call's first user message is agent.CondenseRequest; after
	// the condensation, the task's first user message carries the summary,
	// so the script routes those requests to a conversation of their own.
	// Its reply index counts the assistant messages kept: one.
	script := `{"conversations": [
	  {"match": "^Summarize the conversation so far", "replies": [
	    {"content": "Read big.txt: 3000 lines of filler, nothing to change. Wrote small.txt."}]},
	  {"match": "Task: T9[\\s\\S]*condensation 1;", "replies": [
	    {"content": "(not used: index 0 is never requested after condensing)"},
	    {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done after condensing"}}]}]},
	  {"match": "Task: T9", "replies": [
	    {"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}]},
	    {"tool_calls": [{"name": "write_to_file", "arguments": {"path": "small.txt", "content": "small\n"}}]}]}
	]}`
	e := setup(t, script, &agent.Opts{ContextWindow: 12000, CondenseThreshold: 0.8, KeepRecentTurns: 1, ReadLimit: 5000, OutputLimit: 1 << 20})
	var big strings.Builder
	for i := range 3000 {
		big.WriteString("filler line ")
		big.WriteString(strings.Repeat("x", i%7))
		big.WriteString("\n")
	}
	writeFile(t, filepath.Join(e.wt, "big.txt"), big.String())

	res := e.run(t, "c", "Task: T9 — condense\nRead and write.", "")
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	require.Equal(t, "done after condensing", res.Completion)

	rec := e.load(t, "c")
	require.Equal(t, 1, rec.Meta.Condensations)
	requirePaired(t, rec)
	// Recorded in the API history: the read turn is marked, not deleted,
	// and a summary message follows it.
	var condensed, summaries int
	for _, m := range rec.API {
		if m.CondenseParent == "condense-1" {
			condensed++
		}
		if m.IsSummary {
			summaries++
			require.Equal(t, "condense-1", m.CondenseID)
			require.Contains(t, m.Content[0].Text, "Read big.txt: 3000 lines")
			require.Contains(t, m.Content[0].Text, "Files changed so far: small.txt")
		}
	}
	require.Equal(t, 2, condensed, "the read_file turn and its result")
	require.Equal(t, 1, summaries)
	require.Equal(t, "Task: T9 — condense\nRead and write.", rec.API[0].Content[0].Text, "the task stays verbatim")
	// And in the UI history.
	require.Contains(t, uiKinds(rec), agent.SayCondense)

	// The last request: system prompt, task + summary, the kept turn. The
	// big file is gone and every tool call still has its response.
	last := e.model.last()
	agent.RequireRequestPaired(t, last, "")
	first := firstUserText(last)
	require.True(t, strings.HasPrefix(first, "Task: T9 — condense\nRead and write.\nConversation summary (condensation 1;"))
	var sent strings.Builder
	for _, m := range last {
		for _, p := range m.Parts {
			if tr, ok := p.(llms.ToolCallResponse); ok {
				sent.WriteString(tr.Content)
			}
		}
	}
	require.NotContains(t, sent.String(), "filler line")
	require.Equal(t, llms.ChatMessageTypeSystem, last[0].Role)
	require.Equal(t, 4, res.Usage.Calls, "three turns and one summary")
}

func TestResumeRepairsDanglingToolUse(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": "^Fix", "replies": [
	  {"content": "unused"}, {"content": "unused"},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "repaired and done"}}]}]}]}`, nil)
	// A history left by a crash: an old tool_use without a result in the
	// middle, and the last turn's second call cut off.
	in := json.RawMessage(`{"path":"a"}`)
	rec := &agent.Record{
		Meta: agent.Metadata{ID: "c", RootID: "c", Mode: agent.ModeCode, Status: agent.StatusActive, Worktree: e.wt, Turns: 2},
		API: []agent.APIMessage{
			{Role: agent.RoleUser, Content: []agent.Block{{Type: agent.BlockText, Text: "Fix the bug"}}},
			{Role: agent.RoleAssistant, Content: []agent.Block{{Type: agent.BlockToolUse, ID: "old", Name: "read_file", Input: in}}},
			{Role: agent.RoleUser, Content: []agent.Block{{Type: agent.BlockText, Text: "a stray note"}}},
			{Role: agent.RoleAssistant, Content: []agent.Block{
				{Type: agent.BlockToolUse, ID: "t1", Name: "read_file", Input: in},
				{Type: agent.BlockToolUse, ID: "t2", Name: "read_file", Input: in}}},
			{Role: agent.RoleUser, Content: []agent.Block{{Type: agent.BlockToolResult, ToolUseID: "t1", Content: "1 | a"}}},
		},
	}
	require.NoError(t, e.store.Save(context.Background(), rec))

	res, err := e.agent.Resume(context.Background(), "c", nil)
	require.NoError(t, err)
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)

	got := e.load(t, "c")
	requirePaired(t, got)
	results := toolResults(got)
	require.True(t, strings.HasPrefix(results["old"].Content, "interrupted"))
	require.True(t, strings.HasPrefix(results["t2"].Content, "interrupted"))
	require.Equal(t, "1 | a", results["t1"].Content)
	// The repaired result sits right after its tool_use, before the note.
	require.Equal(t, agent.BlockToolResult, got.API[2].Content[0].Type)
	require.Equal(t, "old", got.API[2].Content[0].ToolUseID)
	agent.RequireRequestPaired(t, e.model.last(), "")
}

func TestResumeWithNote(t *testing.T) {
	t.Parallel()
	e := setup(t, `{"conversations": [{"match": "^Work", "replies": [
	  {"tool_calls": [{"name": "read_file", "arguments": {"path": "nope"}}]},
	  {"tool_calls": [{"name": "read_file", "arguments": {"path": "nope2"}}]},
	  {"tool_calls": [{"name": "read_file", "arguments": {"path": "nope3"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done with the note"}}]}]}]}`,
		&agent.Opts{MaxConsecutiveMistakes: 3})
	res := e.run(t, "c", "Work", "")
	require.Equal(t, agent.ReasonMistakeLimit, res.Reason)
	res, err := e.agent.Resume(context.Background(), "c", &agent.ResumeOpts{Note: "the file is called yes.txt"})
	require.NoError(t, err)
	require.Equal(t, agent.ReasonCompleted, res.Reason)
	require.Contains(t, firstUserText(e.model.last()), "Work")
	var notes []string
	for _, m := range e.model.last() {
		for _, p := range m.Parts {
			if tc, ok := p.(llms.TextContent); ok && strings.Contains(tc.Text, "yes.txt") {
				notes = append(notes, tc.Text)
			}
		}
	}
	require.Equal(t, []string{"Note from the reviewer: the file is called yes.txt"}, notes)
}

func TestExportWritesRooLayout(t *testing.T) {
	t.Parallel()
	e := setup(t, subtaskScript, nil)
	e.run(t, "p", "Orchestrate the work.", agent.ModeOrchestrator)
	dir := t.TempDir()
	require.NoError(t, agent.Export(context.Background(), e.store, "p", dir))
	for _, sub := range []string{"", "subtask-1"} {
		for _, f := range []string{agent.UIMessagesFile, agent.APIHistoryFile, agent.TaskMetadataFile} {
			_, err := os.Stat(filepath.Join(dir, sub, f))
			require.NoError(t, err)
		}
	}
	var meta agent.Metadata
	require.NoError(t, json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "subtask-1", agent.TaskMetadataFile))), &meta))
	require.Equal(t, "p.1", meta.ID)
	require.Equal(t, "p", meta.ParentID)
	want, err := json.Marshal(e.load(t, "p").API)
	require.NoError(t, err)
	require.JSONEq(t, string(want), readFile(t, filepath.Join(dir, agent.APIHistoryFile)))

	err = agent.Export(context.Background(), e.store, "missing", t.TempDir())
	require.ErrorIs(t, err, agent.ErrNotFound)
}

func TestFileStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := agent.NewFileStore(dir)
	ctx := context.Background()
	_, err := s.Load(ctx, "run/T1/1")
	require.ErrorIs(t, err, agent.ErrNotFound)
	rec := &agent.Record{Meta: agent.Metadata{ID: "run/T1/1", Mode: "code", Status: agent.StatusActive},
		UI:  []agent.UIMessage{{TS: 1, Type: agent.UISay, Say: agent.SayTask, Text: "t"}},
		API: []agent.APIMessage{{Role: agent.RoleUser, Content: []agent.Block{{Type: agent.BlockText, Text: "t"}}}}}
	require.NoError(t, s.Save(ctx, rec))
	rec.Meta.Turns = 5
	require.NoError(t, s.Save(ctx, rec))
	got, err := s.Load(ctx, "run/T1/1")
	require.NoError(t, err)
	require.Equal(t, rec, got)
	entries, err := os.ReadDir(s.Dir("run/T1/1"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{agent.APIHistoryFile, agent.TaskMetadataFile, agent.UIMessagesFile}, names, "no temporary files are left")
	require.Equal(t, filepath.Join(dir, "run%2FT1%2F1"), s.Dir("run/T1/1"))
}

func TestSubtaskNeverSavedIsRestartedFromNewTask(t *testing.T) {
	t.Parallel()
	storeDir, wt := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m1 := scripted(t, subtaskScript)
	m1.cancelAt, m1.cancel = 2, cancel // killed at the child's first call
	a1, err := agent.New(m1, agent.NewFileStore(storeDir), &agent.Opts{Skills: &agent.SkillsOpts{NoGlobal: true}})
	require.NoError(t, err)
	_, err = a1.Run(ctx, agent.Request{ID: "p", Task: "Orchestrate the work.", Worktree: wt, Mode: agent.ModeOrchestrator})
	require.ErrorIs(t, err, context.Canceled)
	// As if the process died between saving the parent and the child.
	require.NoError(t, os.RemoveAll(agent.NewFileStore(storeDir).Dir("p.1")))

	m2 := scripted(t, subtaskScript)
	a2, err := agent.New(m2, agent.NewFileStore(storeDir), &agent.Opts{Skills: &agent.SkillsOpts{NoGlobal: true}})
	require.NoError(t, err)
	res, err := a2.Resume(context.Background(), "p", nil)
	require.NoError(t, err)
	require.Equal(t, agent.ReasonCompleted, res.Reason, res.Detail)
	require.Equal(t, 4, m2.calls(), "the child ran from its start, then the parent went on")
	require.Equal(t, "package b\n", readFile(t, filepath.Join(wt, "b.go")))
}
