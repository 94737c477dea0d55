package llm

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/taskloom/taskloom/llm/llmtest"
)

const (
	testOpenAIKey    = "sk-proj-TESTKEY0123456789abcdefABCDEF"
	testAnthropicKey = "sk-ant-api03-TESTKEY0123456789abcdef"
)

func testEnv(k string) string {
	switch k {
	case "OPENAI_API_KEY":
		return testOpenAIKey
	case "ANTHROPIC_API_KEY":
		return testAnthropicKey
	}
	return ""
}

func newGuarded(t *testing.T, spec string, srv *llmtest.Server) llms.Model {
	t.Helper()
	m, err := New(context.Background(), spec, &Opts{BaseURL: srv.URL, GetenvFunc: testEnv})
	require.NoError(t, err)
	return m
}

func requestJSON(t *testing.T, srv *llmtest.Server, i int) map[string]any {
	t.Helper()
	reqs := srv.Requests()
	require.Greater(t, len(reqs), i)
	return reqs[i].JSON()
}

// Gap 1, guarded: with tools the request is not streamed, and the text
// callback sees only the reply text.
func TestGap1GuardKeepsToolJSONOutOfTextStream(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.OpenAIChat("Writing.", llmtest.ToolCall{ID: "call_1", Name: "write_to_file", Arguments: `{"path":"a.go"}`}))
	var chunks []string
	resp, err := newGuarded(t, "openai:gpt-4o", srv).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
	require.NoError(t, err)
	require.Equal(t, []string{"Writing."}, chunks)
	require.Nil(t, requestJSON(t, srv, 0)["stream"], "guarded request must not stream when tools are present")
	c := resp.Choices[0]
	require.Equal(t, "Writing.", c.Content)
	require.Len(t, c.ToolCalls, 1)
	require.Equal(t, `{"path":"a.go"}`, c.ToolCalls[0].FunctionCall.Arguments)
	require.NoError(t, ValidateToolCall(c.ToolCalls[0]))
}

// Without tools, text keeps streaming chunk by chunk.
func TestGuardStreamsTextWithoutTools(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.OpenAIStream(
		llmtest.OpenAIContentChunk("Hel"), llmtest.OpenAIContentChunk("lo"),
		llmtest.OpenAIFinishChunk("stop"), llmtest.OpenAIUsageChunk(9, 2)))
	var chunks []string
	resp, err := newGuarded(t, "openai:gpt-4o", srv).GenerateContent(context.Background(), userMsg("hi"), collect(&chunks))
	require.NoError(t, err)
	require.Equal(t, "Hello", strings.Join(chunks, ""))
	require.Equal(t, "Hello", resp.Choices[0].Content)
	require.Equal(t, true, requestJSON(t, srv, 0)["stream"])
	require.Equal(t, Usage{InputTokens: 9, OutputTokens: 2, CostUSD: (9*2.5 + 2*10) / 1e6}, UsageOf(resp, "gpt-4o"))
}

// Gap 2, guarded: a malformed call comes back as is and ValidateToolCall
// gives an error the agent can feed back.
func TestGap2ValidateToolCallReportsMalformedArguments(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.OpenAIChat("", llmtest.ToolCall{ID: "call_1", Name: "write_to_file", Arguments: `{"path": "a.go", `}))
	resp, err := newGuarded(t, "openai:gpt-4o", srv).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools))
	require.NoError(t, err)
	tc := resp.Choices[0].ToolCalls[0]
	err = ValidateToolCall(tc)
	require.ErrorIs(t, err, ErrMalformedToolCall)
	var tce *ToolCallError
	require.ErrorAs(t, err, &tce)
	require.Equal(t, "call_1", tce.ID)
	require.Equal(t, `{"path": "a.go", `, tce.Arguments)
	require.Contains(t, err.Error(), "write_to_file")
	require.Contains(t, err.Error(), "truncated")
	require.Contains(t, err.Error(), "send it again")
}

func TestValidateToolCall(t *testing.T) {
	t.Parallel()
	call := func(name, args string) llms.ToolCall {
		return llms.ToolCall{ID: "c", Type: "function", FunctionCall: &llms.FunctionCall{Name: name, Arguments: args}}
	}
	tests := []struct {
		name    string
		tc      llms.ToolCall
		wantErr string
		keys    []string
	}{
		{name: "object", tc: call("t", `{"path": "a", "n": 1}`), keys: []string{"n", "path"}},
		{name: "empty means no arguments", tc: call("t", "  "), keys: []string{}},
		{name: "spaces around", tc: call("t", " {} \n"), keys: []string{}},
		{name: "no function", tc: llms.ToolCall{ID: "c"}, wantErr: "no function name or arguments"},
		{name: "no name", tc: call("", `{}`), wantErr: "no function name"},
		{name: "truncated", tc: call("t", `{"a": `), wantErr: "truncated"},
		{name: "syntax", tc: call("t", `{"a" 1}`), wantErr: "at byte"},
		{name: "array", tc: call("t", `[1]`), wantErr: "expected an object, got array"},
		{name: "string", tc: call("t", `"x"`), wantErr: "expected an object, got string"},
		{name: "null", tc: call("t", `null`), wantErr: "got null"},
		{name: "two objects", tc: call("t", `{"path":"a"}{"path":"b"}`), wantErr: "data after the JSON object"},
		{name: "plain text", tc: call("t", `I will write the file`), wantErr: "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args, err := ToolArguments(tt.tc)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrMalformedToolCall)
				require.ErrorContains(t, err, tt.wantErr)
				require.Error(t, ValidateToolCall(tt.tc))
				return
			}
			require.NoError(t, err)
			require.NoError(t, ValidateToolCall(tt.tc))
			var keys []string
			for k := range args {
				keys = append(keys, k)
			}
			require.ElementsMatch(t, tt.keys, keys)
		})
	}
}

// Gap 3, guarded: the request is not streamed, so parallel calls cannot
// interleave; and ValidateToolCall catches the corruption the raw streamed
// client produces.
func TestGap3GuardAvoidsAndDetectsInterleavedCalls(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.OpenAIChat("",
		llmtest.ToolCall{ID: "call_a", Name: "write_to_file", Arguments: `{"path":"a.go"}`},
		llmtest.ToolCall{ID: "call_b", Name: "write_to_file", Arguments: `{"path":"b.go"}`}))
	var chunks []string
	resp, err := newGuarded(t, "openai:gpt-4o", srv).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
	require.NoError(t, err)
	require.Nil(t, requestJSON(t, srv, 0)["stream"])
	calls := resp.Choices[0].ToolCalls
	require.Len(t, calls, 2)
	for i, want := range []string{`{"path":"a.go"}`, `{"path":"b.go"}`} {
		require.Equal(t, want, calls[i].FunctionCall.Arguments)
		require.NoError(t, ValidateToolCall(calls[i]))
	}
	require.Empty(t, chunks, "no text, nothing streamed")

	// Detection: the raw client's corrupted calls fail validation, both of them.
	raw := llmtest.NewServer(t, llmtest.OpenAIStream(
		llmtest.OpenAIToolStartChunk(0, "call_a", "write_to_file", `{"path":`),
		llmtest.OpenAIToolStartChunk(1, "call_b", "write_to_file", `{"path":`),
		llmtest.OpenAIToolArgsChunk(0, `"a.go"}`),
		llmtest.OpenAIToolArgsChunk(1, `"b.go"}`),
		llmtest.OpenAIFinishChunk("tool_calls"),
	))
	resp, err = rawOpenAI(t, raw).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
	require.NoError(t, err)
	for _, tc := range resp.Choices[0].ToolCalls {
		require.ErrorIs(t, ValidateToolCall(tc), ErrMalformedToolCall)
	}
}

func bigArgs(n int) string {
	return `{"path": "big.txt", "content": "` + strings.Repeat("x", n) + `"}`
}

// Gap 4, guarded: a >64 KiB tool argument works, through the non-streamed
// request (tools) and through the transport on a streamed one.
func TestGap4GuardLongToolArgument(t *testing.T) {
	t.Parallel()
	args := bigArgs(200 << 10)

	t.Run("guarded model, openai", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.NewServer(t, llmtest.OpenAIChat("", llmtest.ToolCall{ID: "call_1", Name: "write_to_file", Arguments: args}))
		var chunks []string
		resp, err := newGuarded(t, "openai:gpt-4o", srv).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
		require.NoError(t, err)
		require.Equal(t, args, resp.Choices[0].ToolCalls[0].FunctionCall.Arguments)
		require.NoError(t, ValidateToolCall(resp.Choices[0].ToolCalls[0]))
	})

	t.Run("transport, streamed openai", func(t *testing.T) {
		t.Parallel()
		srv := llmtest.NewServer(t, llmtest.OpenAIStream(
			llmtest.OpenAIContentChunk(strings.Repeat("é", 40<<10)),
			llmtest.OpenAIToolStartChunk(0, "call_1", "write_to_file", args),
			llmtest.OpenAIToolStartChunk(1, "call_2", "write_to_file", `{"path":"b"}`),
			llmtest.OpenAIFinishChunk("tool_calls"),
			llmtest.OpenAIUsageChunk(3, 4),
		))
		m, err := openai.New(openai.WithToken("sk-test"), openai.WithBaseURL(srv.URL),
			openai.WithHTTPClient(&http.Client{Transport: NewTransport(nil, ProviderOpenAI)}))
		require.NoError(t, err)
		var chunks []string
		resp, err := m.GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
		require.NoError(t, err)
		c := resp.Choices[0]
		require.Equal(t, strings.Repeat("é", 40<<10), c.Content)
		require.Len(t, c.ToolCalls, 2)
		require.Equal(t, args, c.ToolCalls[0].FunctionCall.Arguments)
		require.Equal(t, `{"path":"b"}`, c.ToolCalls[1].FunctionCall.Arguments)
		require.Equal(t, "tool_calls", c.StopReason)
		require.Equal(t, 3, c.GenerationInfo["PromptTokens"])
	})

	t.Run("guarded model, anthropic streamed", func(t *testing.T) {
		t.Parallel()
		text := strings.Repeat("y", 70<<10)
		srv := llmtest.NewServer(t, llmtest.AnthropicStream(0, llmtest.AnthropicText(text), llmtest.AnthropicToolUse("toolu_1", "write_to_file", args)))
		var chunks []string
		resp, err := newGuarded(t, "anthropic:claude-sonnet-4-5", srv).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
		require.NoError(t, err)
		require.Greater(t, len(chunks), 1, "the long delta is split into several")
		require.Equal(t, text, strings.Join(chunks, ""))
		c := resp.Choices[0]
		require.Equal(t, text, c.Content)
		require.Len(t, c.ToolCalls, 1)
		requireSameJSON(t, args, c.ToolCalls[0].FunctionCall.Arguments)
	})
}

func requireSameJSON(t *testing.T, want, got string) {
	t.Helper()
	var w, g any
	require.NoError(t, json.Unmarshal([]byte(want), &w))
	require.NoError(t, json.Unmarshal([]byte(got), &g), "got %.200s", got)
	require.Equal(t, w, g)
}

// Gap 5, guarded: malformed tool JSON from Anthropic becomes a tool call
// whose arguments are the malformed text, instead of a failed call.
func TestGap5GuardAnthropicMalformedToolJSON(t *testing.T) {
	t.Parallel()
	const bad = `{"path": "a.go", `
	srv := llmtest.NewServer(t,
		llmtest.AnthropicStream(8, llmtest.AnthropicText("Writing."),
			llmtest.AnthropicToolUse("toolu_1", "write_to_file", bad),
			llmtest.AnthropicToolUse("toolu_2", "read_file", `{"path": "b.go"}`)),
		llmtest.AnthropicMessage(llmtest.AnthropicText("Again."), llmtest.AnthropicToolUse("toolu_3", "write_to_file", bad)),
	)
	m := newGuarded(t, "anthropic:claude-sonnet-4-5", srv)

	var chunks []string
	resp, err := m.GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
	require.NoError(t, err)
	require.Equal(t, "Writing.", strings.Join(chunks, ""))
	require.Len(t, resp.Choices, 1, "blocks are merged into one choice")
	c := resp.Choices[0]
	require.Equal(t, "Writing.", c.Content)
	require.Equal(t, "tool_use", c.StopReason)
	require.Len(t, c.ToolCalls, 2)
	require.Equal(t, llms.ToolCall{ID: "toolu_1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "write_to_file", Arguments: bad}}, c.ToolCalls[0])
	require.ErrorIs(t, ValidateToolCall(c.ToolCalls[0]), ErrMalformedToolCall)
	requireSameJSON(t, `{"path": "b.go"}`, c.ToolCalls[1].FunctionCall.Arguments)
	require.Equal(t, c.ToolCalls[0].FunctionCall, c.FuncCall)
	require.Equal(t, Usage{InputTokens: 13, OutputTokens: 5, CostUSD: (13*3 + 5*15) / 1e6}, UsageOf(resp, "claude-sonnet-4-5"))

	resp, err = m.GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools))
	require.NoError(t, err)
	c = resp.Choices[0]
	require.Equal(t, "Again.", c.Content)
	require.Len(t, c.ToolCalls, 1)
	require.Equal(t, bad, c.ToolCalls[0].FunctionCall.Arguments)
}

// The agent sends the malformed call back in its history with an error
// result; the guarded Anthropic model must send every part of it.
func TestGuardAnthropicHistory(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.AnthropicMessage(llmtest.AnthropicText("ok")))
	m := newGuarded(t, "anthropic:claude-sonnet-4-5", srv)
	history := []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, "be brief"),
		llms.TextParts(llms.ChatMessageTypeHuman, "Task: T1"),
		{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{
			llms.TextContent{Text: "Writing."},
			llms.ToolCall{ID: "toolu_1", Type: "function", FunctionCall: &llms.FunctionCall{Name: "write_to_file", Arguments: `{"path": "a.go", `}},
			llms.ToolCall{ID: "toolu_2", Type: "function", FunctionCall: &llms.FunctionCall{Name: "read_file", Arguments: `{"path":"b.go"}`}},
		}},
		{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{
			llms.ToolCallResponse{ToolCallID: "toolu_1", Name: "write_to_file", Content: MarkToolError("error: malformed")},
			llms.ToolCallResponse{ToolCallID: "toolu_2", Name: "read_file", Content: "package b"},
		}},
		{Role: llms.ChatMessageTypeAI},
	}
	resp, err := m.GenerateContent(context.Background(), history, llms.WithTools(testTools))
	require.NoError(t, err)
	require.Equal(t, "ok", resp.Choices[0].Content)

	var body struct {
		System   []map[string]any `json:"system"`
		Tools    []map[string]any `json:"tools"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(srv.Requests()[0].Body, &body))
	ephemeral := map[string]any{"type": "ephemeral"}
	require.Equal(t, []map[string]any{{"type": "text", "text": "be brief", "cache_control": ephemeral}}, body.System,
		"the system prompt is a cache breakpoint")
	require.Equal(t, ephemeral, body.Tools[len(body.Tools)-1]["cache_control"], "the tools are a cache breakpoint")
	require.Equal(t, ephemeral, body.Messages[0].Content[0]["cache_control"], "the task is a cache breakpoint")
	last := body.Messages[2].Content
	require.Equal(t, ephemeral, last[len(last)-1]["cache_control"], "the newest message is a cache breakpoint")
	require.Nil(t, body.Messages[1].Content[0]["cache_control"])
	require.Equal(t, true, body.Messages[2].Content[0]["is_error"], "a failed tool result says so")
	require.Equal(t, "error: malformed", body.Messages[2].Content[0]["content"])
	require.Nil(t, body.Messages[2].Content[1]["is_error"])
	var roles []string
	var types []string
	for _, msg := range body.Messages {
		roles = append(roles, msg.Role)
		for _, c := range msg.Content {
			types = append(types, c["type"].(string))
		}
	}
	require.Equal(t, []string{"user", "assistant", "user"}, roles, "consecutive same-role messages are merged into one turn")
	require.Equal(t, []string{"text", "text", "tool_use", "tool_use", "tool_result", "tool_result"}, types)
	require.Equal(t, map[string]any{malformedKey: `{"path": "a.go", `}, body.Messages[1].Content[1]["input"])
}

// Gap 6: ollama is refused with the way around.
func TestGap6NewRefusesOllama(t *testing.T) {
	t.Parallel()
	_, err := New(context.Background(), "ollama:llama3.1", &Opts{GetenvFunc: testEnv})
	require.ErrorIs(t, err, ErrBadSpec)
	require.ErrorContains(t, err, "openai-compatible:MODEL@http://localhost:11434/v1")
	require.ErrorContains(t, err, "drops tool definitions")
}

func TestNewProviders(t *testing.T) {
	t.Parallel()
	noEnv := func(string) string { return "" }
	_, err := New(context.Background(), "anthropic:claude-sonnet-4-5", &Opts{GetenvFunc: noEnv})
	require.ErrorIs(t, err, ErrMissingKey)
	require.ErrorContains(t, err, "ANTHROPIC_API_KEY")
	_, err = New(context.Background(), "openai:gpt-4o", &Opts{GetenvFunc: noEnv})
	require.ErrorIs(t, err, ErrMissingKey)
	require.ErrorContains(t, err, "OPENAI_API_KEY")

	// openai-compatible works without a key, at the spec's URL, and sends none.
	srv := llmtest.NewServer(t, llmtest.OpenAIChat("hi from local"))
	m, err := New(context.Background(), "openai-compatible:llama3.1:8b@"+srv.URL+"/v1", &Opts{GetenvFunc: noEnv})
	require.NoError(t, err)
	out, err := m.Call(context.Background(), "hello")
	require.NoError(t, err)
	require.Equal(t, "hi from local", out)
	req := srv.Requests()[0]
	require.Equal(t, "/v1/chat/completions", req.Path)
	require.Empty(t, req.Header.Get("Authorization"))
	require.Equal(t, "llama3.1:8b", req.JSON()["model"])

	// Keys go where the provider wants them.
	asrv := llmtest.NewServer(t, llmtest.AnthropicMessage(llmtest.AnthropicText("hi")))
	_, err = newGuarded(t, "anthropic:claude-sonnet-4-5", asrv).Call(context.Background(), "hello")
	require.NoError(t, err)
	require.Equal(t, testAnthropicKey, asrv.Requests()[0].Header.Get("X-Api-Key"))
	require.Equal(t, "claude-sonnet-4-5", asrv.Requests()[0].JSON()["model"])
}

func TestGuardRedactsProviderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec string
		key  string
	}{
		{"openai:gpt-4o", testOpenAIKey},
		{"anthropic:claude-sonnet-4-5", testAnthropicKey},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewServer(t, llmtest.Error(http.StatusUnauthorized, "invalid x-api-key: "+tt.key+" was rejected"))
			_, err := newGuarded(t, tt.spec, srv).GenerateContent(context.Background(), userMsg("hi"))
			require.Error(t, err)
			require.NotContains(t, err.Error(), tt.key)
			require.Contains(t, err.Error(), Redacted)
			require.Contains(t, err.Error(), "401")
		})
	}
}

// Secrets other than the key (the environment's, as Opts.Secrets) are
// redacted from the provider's errors too: an error body may echo a request.
func TestGuardRedactsOtherSecrets(t *testing.T) {
	t.Parallel()
	const other = "db-password-0123456789"
	srv := llmtest.NewServer(t, llmtest.Error(http.StatusBadRequest, "prompt quoted "+other+" too long"))
	m, err := New(context.Background(), "anthropic:claude-sonnet-4-5", &Opts{BaseURL: srv.URL, GetenvFunc: testEnv, Secrets: []string{other}})
	require.NoError(t, err)
	_, err = m.GenerateContent(context.Background(), userMsg("hi"))
	require.Error(t, err)
	require.NotContains(t, err.Error(), other)
	require.Contains(t, err.Error(), "prompt quoted "+Redacted)
}

func TestGuardContextCancel(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.OpenAIChat("never"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newGuarded(t, "openai:gpt-4o", srv).GenerateContent(ctx, userMsg("hi"))
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.Is(err, context.DeadlineExceeded))
}

func TestGuardWrapsExistingModels(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.OpenAIChat("Done.", llmtest.ToolCall{ID: "call_1", Name: "write_to_file", Arguments: `{"path":"a.go"}`}))
	g := Guard(rawOpenAI(t, srv))
	require.Same(t, g, Guard(g), "guarding twice is a no-op")
	var chunks []string
	resp, err := g.GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
	require.NoError(t, err)
	require.Equal(t, []string{"Done."}, chunks)
	require.Nil(t, requestJSON(t, srv, 0)["stream"])
	require.Len(t, resp.Choices[0].ToolCalls, 1)

	asrv := llmtest.NewServer(t, llmtest.AnthropicMessage(llmtest.AnthropicText("a"), llmtest.AnthropicToolUse("toolu_1", "read_file", `{"path":"b"}`)))
	resp, err = Guard(rawAnthropic(t, asrv)).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools))
	require.NoError(t, err)
	require.Len(t, resp.Choices, 1, "anthropic recognised: blocks merged")
	require.Equal(t, "a", resp.Choices[0].Content)
	require.Equal(t, "function", resp.Choices[0].ToolCalls[0].Type)
}
