package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

func TestParseScriptErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want string // substring of the error
	}{
		{"not json", `{`, "decode script"},
		{"unknown key", `{"conversations": [{"match": "a", "replies": [{"content": "x"}], "extra": 1}]}`, `unknown field "extra"`},
		{"no conversations", `{"conversations": []}`, "at least one conversation"},
		{"empty match", `{"conversations": [{"match": "", "replies": [{"content": "x"}]}]}`, "conversations[0].match: must not be empty"},
		{"bad regex names index", `{"conversations": [{"match": "a", "replies": [{"content": "x"}]}, {"match": "(", "replies": [{"content": "x"}]}]}`, "conversations[1].match: error parsing regexp"},
		{"no replies", `{"conversations": [{"match": "a", "replies": []}]}`, "conversations[0].replies: must have at least one reply"},
		{"empty reply", `{"conversations": [{"match": "a", "replies": [{"content": "x"}, {}]}]}`, "conversations[0].replies[1]: needs content or tool_calls"},
		{"negative delay", `{"conversations": [{"match": "a", "replies": [{"content": "x", "delay_ms": -1}]}]}`, "delay_ms: must not be negative, got -1"},
		{"tool without name", `{"conversations": [{"match": "a", "replies": [{"tool_calls": [{"arguments": {}}]}]}]}`, "tool_calls[0].name: must not be empty"},
		{"array arguments", `{"conversations": [{"match": "a", "replies": [{"tool_calls": [{"name": "t", "arguments": [1]}]}]}]}`, "tool_calls[0].arguments: must be an object or a string"},
		{"trailing data", `{"conversations": [{"match": "a", "replies": [{"content": "x"}]}]} {}`, "trailing data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseScript([]byte(tt.data))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestLoadScript(t *testing.T) {
	t.Parallel()
	s, err := LoadScript("testdata/session.json")
	require.NoError(t, err)
	require.Len(t, s.Conversations, 1)
	require.Len(t, s.Conversations[0].Replies, 2)
	require.Equal(t, 50, s.Conversations[0].Replies[1].DelayMS)

	_, err = LoadScript("testdata/missing.json")
	require.ErrorContains(t, err, "missing.json")
}

func TestArgumentString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw  string
		want string
	}{
		{``, `{}`},
		{`null`, `{}`},
		{`{ "a" : 1, "b": [1, 2] }`, `{"a":1,"b":[1,2]}`},
		{`"{\"result\": \"done\"}"`, `{"result": "done"}`},
		{`"{\"path\": \"a.go\", "`, `{"path": "a.go", `},
		{`"not json at all"`, `not json at all`},
	}
	for _, tt := range tests {
		got, err := ScriptedToolCall{Name: "t", Arguments: []byte(tt.raw)}.ArgumentString()
		require.NoError(t, err)
		require.Equal(t, tt.want, got, "raw %s", tt.raw)
	}
}

const testScript = `{"conversations": [
  {"match": "^Break down this PRODUCT.md", "replies": [{"content": "{\"tasks\": []}"}]},
  {"match": "Task: T1\\b[\\s\\S]*Attempt: 1 of", "replies": [
    {"content": "writing", "tool_calls": [
      {"name": "write_to_file", "arguments": {"path": "a.go", "content": "package a\n"}},
      {"name": "read_file", "arguments": {"path": "b.go"}}]},
    {"tool_calls": [{"name": "attempt_completion", "arguments": "{\"result\": "}]}
  ]},
  {"match": "Task: T1\\b", "replies": [{"content": "second attempt"}]}
]}`

func setup(t *testing.T) *Scripted {
	t.Helper()
	s, err := ParseScript([]byte(testScript))
	require.NoError(t, err)
	return NewScripted(s)
}

func user(text string) llms.MessageContent {
	return llms.TextParts(llms.ChatMessageTypeHuman, text)
}

func ai(text string) llms.MessageContent {
	return llms.TextParts(llms.ChatMessageTypeAI, text)
}

func TestScriptedReplies(t *testing.T) {
	t.Parallel()
	m := setup(t)
	sys := llms.TextParts(llms.ChatMessageTypeSystem, "Task: T1 in the system prompt does not count")
	tests := []struct {
		name      string
		msgs      []llms.MessageContent
		content   string
		stop      string
		toolCalls []llms.ToolCall
	}{
		{
			name:    "breakdown",
			msgs:    []llms.MessageContent{sys, user("Break down this PRODUCT.md\n# P")},
			content: `{"tasks": []}`, stop: "stop",
		},
		{
			name:    "first reply with two tool calls",
			msgs:    []llms.MessageContent{sys, user("Task: T1 — a\nAttempt: 1 of 3")},
			content: "writing", stop: "tool_calls",
			toolCalls: []llms.ToolCall{
				{ID: "call_1_0_0", Type: "function", FunctionCall: &llms.FunctionCall{Name: "write_to_file", Arguments: `{"path":"a.go","content":"package a\n"}`}},
				{ID: "call_1_0_1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "read_file", Arguments: `{"path":"b.go"}`}},
			},
		},
		{
			name: "second reply is malformed verbatim",
			msgs: []llms.MessageContent{
				user("Task: T1 — a\nAttempt: 1 of 3"), ai("writing"),
				{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: "call_1_0_0", Content: "ok"}}},
				user("later user messages do not matter"),
			},
			stop: "tool_calls",
			toolCalls: []llms.ToolCall{
				{ID: "call_1_1_0", Type: "function", FunctionCall: &llms.FunctionCall{Name: "attempt_completion", Arguments: `{"result": `}},
			},
		},
		{
			name:    "first matching conversation wins",
			msgs:    []llms.MessageContent{user("Task: T1 — a\nAttempt: 2 of 3")},
			content: "second attempt", stop: "stop",
		},
		{
			name: "text parts are joined",
			msgs: []llms.MessageContent{{Role: llms.ChatMessageTypeHuman, Parts: []llms.ContentPart{
				llms.TextContent{Text: "Task: T1 — a"}, llms.TextContent{Text: "Attempt: 1 of 3"}}}},
			content: "writing", stop: "tool_calls",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, err := m.GenerateContent(context.Background(), tt.msgs)
			require.NoError(t, err)
			require.Len(t, resp.Choices, 1)
			c := resp.Choices[0]
			require.Equal(t, tt.content, c.Content)
			require.Equal(t, tt.stop, c.StopReason)
			if tt.toolCalls != nil {
				require.Equal(t, tt.toolCalls, c.ToolCalls)
				require.Equal(t, tt.toolCalls[0].FunctionCall, c.FuncCall)
			}
			p, _ := c.GenerationInfo["PromptTokens"].(int)
			cp, _ := c.GenerationInfo["CompletionTokens"].(int)
			tot, _ := c.GenerationInfo["TotalTokens"].(int)
			require.Positive(t, p)
			require.Positive(t, cp)
			require.Equal(t, p+cp, tot)
		})
	}
}

func TestScriptedErrors(t *testing.T) {
	t.Parallel()
	m := setup(t)
	long := "no match here " + strings.Repeat("x", 200)
	_, err := m.GenerateContent(context.Background(), []llms.MessageContent{user(long)})
	require.ErrorIs(t, err, ErrNoMatch)
	require.Contains(t, err.Error(), fmt.Sprintf("%q", truncate(long, 80)))
	require.NotContains(t, err.Error(), strings.Repeat("x", 100))

	_, err = m.GenerateContent(context.Background(), []llms.MessageContent{ai("only ai")})
	require.ErrorIs(t, err, ErrNoMatch)

	_, err = m.GenerateContent(context.Background(), []llms.MessageContent{user("Task: T1\nAttempt: 1 of 3"), ai("a"), ai("b")})
	require.ErrorIs(t, err, ErrScriptExhausted)
	require.Contains(t, err.Error(), `match "Task: T1\\b[\\s\\S]*Attempt: 1 of"`)
	require.Contains(t, err.Error(), "reply index 2")

	// A script built by hand with a bad regex fails at call time, not at construction.
	bad := NewScripted(&Script{Conversations: []Conversation{{Match: "(", Replies: []Reply{{Content: "x"}}}}})
	_, err = bad.GenerateContent(context.Background(), []llms.MessageContent{user("x")})
	require.ErrorContains(t, err, "conversations[0].match")
}

func TestScriptedDelay(t *testing.T) {
	t.Parallel()
	s, err := ParseScript([]byte(`{"conversations": [{"match": ".", "replies": [{"content": "x", "delay_ms": 1500}]}]}`))
	require.NoError(t, err)

	t.Run("waits for delay", func(t *testing.T) {
		t.Parallel()
		m := NewScripted(s)
		var got []time.Duration
		m.sleepFunc = func(ctx context.Context, d time.Duration) error {
			got = append(got, d)
			return nil
		}
		_, err := m.GenerateContent(context.Background(), []llms.MessageContent{user("x")})
		require.NoError(t, err)
		require.Equal(t, []time.Duration{1500 * time.Millisecond}, got)
	})
	t.Run("cancel ends the wait", func(t *testing.T) {
		t.Parallel()
		m := NewScripted(s)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := m.GenerateContent(ctx, []llms.MessageContent{user("x")})
			done <- err
		}()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
}

func TestScriptedStreamingAndCall(t *testing.T) {
	t.Parallel()
	m := setup(t)
	var chunks []string
	resp, err := m.GenerateContent(context.Background(), []llms.MessageContent{user("Task: T1\nAttempt: 2 of 3")},
		llms.WithStreamingFunc(func(_ context.Context, b []byte) error {
			chunks = append(chunks, string(b))
			return nil
		}))
	require.NoError(t, err)
	require.Equal(t, []string{"second attempt"}, chunks)
	require.Equal(t, "second attempt", resp.Choices[0].Content)

	_, err = m.GenerateContent(context.Background(), []llms.MessageContent{user("Task: T1\nAttempt: 2 of 3")},
		llms.WithStreamingFunc(func(context.Context, []byte) error { return errors.New("stop") }))
	require.ErrorContains(t, err, "stop")

	out, err := m.Call(context.Background(), "Break down this PRODUCT.md\n")
	require.NoError(t, err)
	require.Equal(t, `{"tasks": []}`, out)
}

func TestScriptedConcurrent(t *testing.T) {
	t.Parallel()
	m := setup(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Go(func() {
			msgs := []llms.MessageContent{user("Task: T1\nAttempt: 1 of 3")}
			want := "writing"
			if i%2 == 1 {
				msgs = append(msgs, ai("writing"))
				want = ""
			}
			resp, err := m.GenerateContent(context.Background(), msgs)
			if err == nil && resp.Choices[0].Content != want {
				err = fmt.Errorf("got %q, want %q", resp.Choices[0].Content, want)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}
