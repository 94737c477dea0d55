// Package llmtest provides local fake LLM provider servers for tests: an
// httptest server that plays canned HTTP responses in order and records the
// requests it got, and builders for the wire formats of OpenAI chat
// completions and Anthropic messages, streamed (SSE) and not.
//
// Nothing here talks to a real provider.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Response is one canned HTTP response.
type Response struct {
	Status      int // 0 means 200
	ContentType string
	Body        string
}

// Server is a fake provider. It answers the i-th request with the i-th
// response; requests past the end get a 500 with an OpenAI/Anthropic-style
// error body.
type Server struct {
	*httptest.Server

	mu        sync.Mutex
	responses []Response
	requests  []Request
}

// Request is a request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the request body into a generic map.
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// NewServer starts a server playing responses; it is closed in t.Cleanup.
func NewServer(t testing.TB, responses ...Response) *Server {
	t.Helper()
	s := Start(responses...)
	t.Cleanup(s.Close)
	return s
}

// Start starts a server playing responses; the caller closes it.
func Start(responses ...Response) *Server {
	s := &Server{responses: responses}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	var resp Response
	ok := i < len(s.responses)
	if ok {
		resp = s.responses[i]
	}
	s.mu.Unlock()
	if !ok {
		resp = Error(http.StatusInternalServerError, fmt.Sprintf("llmtest: no canned response for request %d", i))
	}
	if resp.ContentType != "" {
		w.Header().Set("Content-Type", resp.ContentType)
	}
	status := resp.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, resp.Body)
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Error is an error response in the shape both providers use:
// {"error": {"type": "...", "message": "..."}}.
func Error(status int, message string) Response {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": message}})
	return Response{Status: status, ContentType: "application/json", Body: string(b)}
}

// JSON is a 200 application/json response with body v (a string is used
// verbatim, anything else is marshalled).
func JSON(v any) Response {
	body, ok := v.(string)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		body = string(b)
	}
	return Response{ContentType: "application/json", Body: body}
}

// ToolCall is a tool call in a canned response. Arguments is sent as is, so
// it may be malformed on purpose.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// OpenAIChat is a non-streamed chat.completion response with usage.
func OpenAIChat(content string, calls ...ToolCall) Response {
	msg := map[string]any{"role": "assistant", "content": content}
	finish := "stop"
	if len(calls) > 0 {
		var tcs []map[string]any
		for _, c := range calls {
			tcs = append(tcs, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = tcs
		finish = "tool_calls"
	}
	return JSON(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": 1, "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
	})
}

// OpenAIStream is a chat.completion.chunk SSE stream: each chunk is one
// "data:" event, followed by "data: [DONE]".
func OpenAIStream(chunks ...string) Response {
	var b strings.Builder
	for _, c := range chunks {
		fmt.Fprintf(&b, "data: %s\n\n", c)
	}
	b.WriteString("data: [DONE]\n\n")
	return Response{ContentType: "text/event-stream", Body: b.String()}
}

func openAIChunk(delta map[string]any, finish any) string {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
	return string(b)
}

// OpenAIContentChunk is a chunk carrying text content.
func OpenAIContentChunk(text string) string {
	return openAIChunk(map[string]any{"role": "assistant", "content": text}, nil)
}

// OpenAIToolStartChunk is a chunk that opens tool call number index, with
// the first piece of its arguments.
func OpenAIToolStartChunk(index int, id, name, args string) string {
	return openAIChunk(map[string]any{"tool_calls": []any{map[string]any{
		"index": index, "id": id, "type": "function",
		"function": map[string]any{"name": name, "arguments": args}}}}, nil)
}

// OpenAIToolArgsChunk is a chunk that continues the arguments of tool call
// number index, as OpenAI streams them (no id, no type).
func OpenAIToolArgsChunk(index int, args string) string {
	return openAIChunk(map[string]any{"tool_calls": []any{map[string]any{
		"index": index, "function": map[string]any{"arguments": args}}}}, nil)
}

// OpenAIFinishChunk closes the stream's choice with a finish reason.
func OpenAIFinishChunk(reason string) string {
	return openAIChunk(map[string]any{}, reason)
}

// OpenAIUsageChunk is the final usage-only chunk sent with
// stream_options.include_usage.
func OpenAIUsageChunk(prompt, completion int) string {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
		"choices": []any{},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
	return string(b)
}

// AnthropicBlock is a content block of an Anthropic message: text, or a
// tool_use whose Input is raw JSON text (possibly malformed on purpose;
// AnthropicMessage sends a malformed Input as a JSON string).
type AnthropicBlock struct {
	Text  string
	Tool  *ToolCall
	Input string
}

// AnthropicText is a text block.
func AnthropicText(text string) AnthropicBlock { return AnthropicBlock{Text: text} }

// AnthropicToolUse is a tool_use block.
func AnthropicToolUse(id, name, input string) AnthropicBlock {
	return AnthropicBlock{Tool: &ToolCall{ID: id, Name: name, Arguments: input}}
}

// AnthropicMessage is a non-streamed messages response with usage
// (input 13, output 5). A tool_use input that is not valid JSON is sent as a
// JSON string.
func AnthropicMessage(blocks ...AnthropicBlock) Response {
	var content []any
	stop := "end_turn"
	for _, bl := range blocks {
		if bl.Tool == nil {
			content = append(content, map[string]any{"type": "text", "text": bl.Text})
			continue
		}
		stop = "tool_use"
		var input any = json.RawMessage(bl.Tool.Arguments)
		if !json.Valid([]byte(bl.Tool.Arguments)) {
			input = bl.Tool.Arguments
		}
		content = append(content, map[string]any{"type": "tool_use", "id": bl.Tool.ID, "name": bl.Tool.Name, "input": input})
	}
	return JSON(map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "model": "claude-test",
		"content": content, "stop_reason": stop,
		"usage": map[string]any{"input_tokens": 13, "output_tokens": 5},
	})
}

// AnthropicStream is a messages SSE stream of the given blocks, as the API
// sends it: message_start, per block content_block_start, deltas (text in
// pieces of chunk bytes, tool input as input_json_delta pieces, which are
// concatenated verbatim and so may be malformed) and content_block_stop,
// then message_delta and message_stop. chunk <= 0 sends each block's
// payload in one delta.
func AnthropicStream(chunk int, blocks ...AnthropicBlock) Response {
	var b strings.Builder
	ev := func(v map[string]any) {
		data, _ := json.Marshal(v)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", v["type"], data)
	}
	ev(map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_test", "type": "message", "role": "assistant", "model": "claude-test", "content": []any{},
		"usage": map[string]any{"input_tokens": 13, "output_tokens": 1}}})
	stop := "end_turn"
	for i, bl := range blocks {
		if bl.Tool == nil {
			ev(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, p := range Split(bl.Text, chunk) {
				ev(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": p}})
			}
		} else {
			stop = "tool_use"
			ev(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{
				"type": "tool_use", "id": bl.Tool.ID, "name": bl.Tool.Name, "input": map[string]any{}}})
			for _, p := range Split(bl.Tool.Arguments, chunk) {
				ev(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
			}
		}
		ev(map[string]any{"type": "content_block_stop", "index": i})
	}
	ev(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop}, "usage": map[string]any{"output_tokens": 5}})
	ev(map[string]any{"type": "message_stop"})
	return Response{ContentType: "text/event-stream", Body: b.String()}
}

// Split cuts s into pieces of at most n bytes (n <= 0: one piece). It may
// cut inside a UTF-8 sequence; use ASCII in tests that care.
func Split(s string, n int) []string {
	if n <= 0 || len(s) <= n {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
