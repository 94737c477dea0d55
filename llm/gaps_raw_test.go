package llm

// These tests pin the langchaingo v0.1.14 gaps the guards exist for, on the
// raw clients against a local server speaking the provider's wire format.
// If one starts failing after a langchaingo upgrade, the gap may be fixed
// upstream: re-check the matching guard and its doc.

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/taskloom/taskloom/llm/llmtest"
)

var testTools = []llms.Tool{{Type: "function", Function: &llms.FunctionDefinition{
	Name: "write_to_file", Description: "write a file",
	Parameters: map[string]any{"type": "object", "properties": map[string]any{
		"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}},
}}}

func rawOpenAI(t *testing.T, srv *llmtest.Server) llms.Model {
	t.Helper()
	m, err := openai.New(openai.WithToken("sk-test"), openai.WithModel("gpt-4o"), openai.WithBaseURL(srv.URL))
	require.NoError(t, err)
	return m
}

func rawAnthropic(t *testing.T, srv *llmtest.Server) llms.Model {
	t.Helper()
	m, err := anthropic.New(anthropic.WithToken("sk-ant-test"), anthropic.WithModel("claude-sonnet-4-5"), anthropic.WithBaseURL(srv.URL))
	require.NoError(t, err)
	return m
}

func collect(chunks *[]string) llms.CallOption {
	return llms.WithStreamingFunc(func(_ context.Context, b []byte) error {
		*chunks = append(*chunks, string(b))
		return nil
	})
}

func userMsg(text string) []llms.MessageContent {
	return []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, text)}
}

// Gap 1: tool-call argument deltas reach the text streaming callback.
func TestGap1RawToolDeltasLeakIntoTextStream(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.OpenAIStream(
		llmtest.OpenAIContentChunk("Writing."),
		llmtest.OpenAIToolStartChunk(0, "call_1", "write_to_file", `{"path":`),
		llmtest.OpenAIToolArgsChunk(0, `"a.go"}`),
		llmtest.OpenAIFinishChunk("tool_calls"),
	))
	var chunks []string
	_, err := rawOpenAI(t, srv).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
	require.NoError(t, err)
	streamed := strings.Join(chunks, "")
	require.Contains(t, streamed, `"write_to_file"`, "tool-call JSON should leak into the text stream on the raw client")
}

// Gap 2: malformed arguments come back verbatim with no error.
func TestGap2RawMalformedArgumentsNoError(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.OpenAIChat("", llmtest.ToolCall{ID: "call_1", Name: "write_to_file", Arguments: `{"path": "a.go", `}))
	resp, err := rawOpenAI(t, srv).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools))
	require.NoError(t, err)
	require.Equal(t, `{"path": "a.go", `, resp.Choices[0].ToolCalls[0].FunctionCall.Arguments)
}

// Gap 3: interleaved parallel tool-call deltas are merged into the wrong call.
func TestGap3RawInterleavedParallelDeltasCorrupt(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.OpenAIStream(
		llmtest.OpenAIToolStartChunk(0, "call_a", "write_to_file", `{"path":`),
		llmtest.OpenAIToolStartChunk(1, "call_b", "write_to_file", `{"path":`),
		llmtest.OpenAIToolArgsChunk(0, `"a.go"}`),
		llmtest.OpenAIToolArgsChunk(1, `"b.go"}`),
		llmtest.OpenAIFinishChunk("tool_calls"),
	))
	var chunks []string
	resp, err := rawOpenAI(t, srv).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
	require.NoError(t, err, "the corruption is silent")
	calls := resp.Choices[0].ToolCalls
	require.Len(t, calls, 2)
	require.Equal(t, `{"path":`, calls[0].FunctionCall.Arguments, "call 0 lost its continuation")
	require.Equal(t, `{"path":"a.go"}"b.go"}`, calls[1].FunctionCall.Arguments, "call 1 got both continuations")
}

// Gap 4: one SSE line over 64 KiB fails the whole call.
func TestGap4RawLongSSELineFails(t *testing.T) {
	t.Parallel()
	big := `{"path": "a.go", "content": "` + strings.Repeat("x", 70*1024) + `"}`
	srv := llmtest.NewServer(t, llmtest.OpenAIStream(
		llmtest.OpenAIToolStartChunk(0, "call_1", "write_to_file", big),
		llmtest.OpenAIFinishChunk("tool_calls"),
	))
	var chunks []string
	_, err := rawOpenAI(t, srv).GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
	require.ErrorContains(t, err, "token too long")

	asrv := llmtest.NewServer(t, llmtest.AnthropicStream(0, llmtest.AnthropicText(strings.Repeat("y", 70*1024))))
	_, err = rawAnthropic(t, asrv).GenerateContent(context.Background(), userMsg("hi"), collect(&chunks))
	require.ErrorContains(t, err, "token too long")
}

// Gap 5: the Anthropic client fails the whole call on malformed tool JSON.
func TestGap5RawAnthropicMalformedToolJSONFailsCall(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t,
		llmtest.AnthropicStream(8, llmtest.AnthropicText("Writing."), llmtest.AnthropicToolUse("toolu_1", "write_to_file", `{"path": "a.go", `)),
		llmtest.AnthropicMessage(llmtest.AnthropicToolUse("toolu_2", "write_to_file", `{"path": "a.go", `)),
	)
	m := rawAnthropic(t, srv)
	var chunks []string
	_, err := m.GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools), collect(&chunks))
	require.ErrorContains(t, err, "failed to unmarshal input data")
	_, err = m.GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools))
	require.ErrorContains(t, err, "cannot unmarshal string")
}

// Gap 6: the Ollama client sends no tool definitions.
func TestGap6RawOllamaDropsTools(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewServer(t, llmtest.JSON(`{"model":"llama3","created_at":"2024-01-01T00:00:00Z","message":{"role":"assistant","content":"hi"},"done":true}`))
	m, err := ollama.New(ollama.WithServerURL(srv.URL), ollama.WithModel("llama3"))
	require.NoError(t, err)
	_, err = m.GenerateContent(context.Background(), userMsg("hi"), llms.WithTools(testTools))
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.NotContains(t, string(reqs[0].Body), "write_to_file")
}
