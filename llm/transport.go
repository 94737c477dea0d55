package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"
)

const (
	// sseSplitOver is the SSE line length above which the transport splits
	// an event. langchaingo reads streams with a bufio.Scanner whose
	// limit is 64 KiB per line.
	sseSplitOver = 32 << 10
	// ssePiece is the most raw text bytes put in one split event. JSON
	// escaping grows text at most sixfold, so a piece stays under 64 KiB.
	ssePiece = 8 << 10
	// sseMaxLine bounds the memory one incoming line may take.
	sseMaxLine = 64 << 20
)

// NewTransport returns an http.RoundTripper for langchaingo clients of the
// given provider (ProviderAnthropic, or ProviderOpenAI and
// ProviderOpenAICompatible) that rewrites traffic around langchaingo
// v0.1.14's gaps. base nil means http.DefaultTransport. New installs it on
// every provider model it builds; see the package doc for what it does.
func NewTransport(base http.RoundTripper, provider string) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &guardTransport{base: base, anthropic: provider == ProviderAnthropic}
}

type guardTransport struct {
	base      http.RoundTripper
	anthropic bool
}

func (t *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.anthropic && req.Body != nil && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/messages") {
		var err error
		if req, err = mergeAnthropicTurns(req); err != nil {
			return nil, err
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return resp, err
	}
	br := bufio.NewReaderSize(resp.Body, 4096)
	head, _ := br.Peek(16)
	head = bytes.TrimLeft(head, " \t\r\n")
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") ||
		bytes.HasPrefix(head, []byte("data:")) || bytes.HasPrefix(head, []byte("event:")) || bytes.HasPrefix(head, []byte(":"))
	switch {
	case sse:
		resp.Body = &sseRewriter{src: br, closer: resp.Body, anthropic: t.anthropic, tools: map[int]*strings.Builder{}}
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	case t.anthropic:
		body, err := io.ReadAll(br)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read anthropic response: %w", err)
		}
		body = fixAnthropicMessage(body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Del("Content-Length")
	default:
		resp.Body = struct {
			io.Reader
			io.Closer
		}{br, resp.Body}
	}
	return resp, nil
}

// mergeAnthropicTurns merges consecutive messages of the same role in an
// Anthropic messages request into one turn, concatenating their content
// blocks. The guarded model splits multi-part assistant and tool messages
// into one part per message (langchaingo sends only the first part of a
// message); this puts them back together so the request alternates roles.
func mergeAnthropicTurns(req *http.Request) (*http.Request, error) {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read anthropic request: %w", err)
	}
	out := body
	var payload map[string]json.RawMessage
	if json.Unmarshal(body, &payload) == nil {
		var msgs []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		}
		if raw, ok := payload["messages"]; ok && json.Unmarshal(raw, &msgs) == nil {
			merged := msgs[:0]
			for _, m := range msgs {
				if n := len(merged); n > 0 && merged[n-1].Role == m.Role {
					merged[n-1].Content = append(merged[n-1].Content, m.Content...)
					continue
				}
				merged = append(merged, m)
			}
			if b, err := json.Marshal(merged); err == nil {
				payload["messages"] = b
				if b, err := json.Marshal(payload); err == nil {
					out = b
				}
			}
		}
	}
	r2 := req.Clone(req.Context())
	r2.Body = io.NopCloser(bytes.NewReader(out))
	r2.ContentLength = int64(len(out))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out)), nil }
	return r2, nil
}

// fixAnthropicMessage rewrites every tool_use block whose input is not a
// JSON object (langchaingo decodes input into a map and fails the whole
// call otherwise) into {malformedKey: text}. It returns body unchanged when
// there is nothing to fix.
func fixAnthropicMessage(body []byte) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return body
	}
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(msg["content"], &blocks) != nil {
		return body
	}
	changed := false
	for _, b := range blocks {
		var typ string
		_ = json.Unmarshal(b["type"], &typ)
		if typ != "tool_use" {
			continue
		}
		in := bytes.TrimSpace(b["input"])
		if len(in) == 0 || isJSONObject(in) {
			continue
		}
		text := string(in)
		var s string
		if json.Unmarshal(in, &s) == nil {
			text = s
		}
		b["input"] = json.RawMessage(wrapMalformed(text))
		changed = true
	}
	if !changed {
		return body
	}
	content, err := json.Marshal(blocks)
	if err != nil {
		return body
	}
	msg["content"] = content
	out, err := json.Marshal(msg)
	if err != nil {
		return body
	}
	return out
}

// sseRewriter rewrites a server-sent event stream line by line:
//   - lines longer than sseSplitOver are split into several events
//     (text and argument deltas cut into pieces), or dropped when they are
//     not data lines (langchaingo ignores those anyway);
//   - for Anthropic, tool_use input deltas are held until the block stops,
//     then sent again in pieces, wrapped by wrapMalformed when the whole
//     input is not a JSON object.
type sseRewriter struct {
	src       *bufio.Reader
	closer    io.Closer
	anthropic bool

	out          bytes.Buffer
	err          error
	pendingEvent string                   // an "event:" line waiting for its data line
	tools        map[int]*strings.Builder // Anthropic tool_use blocks by index
}

func (r *sseRewriter) Close() error { return r.closer.Close() }

func (r *sseRewriter) Read(p []byte) (int, error) {
	for r.out.Len() == 0 && r.err == nil {
		line, err := readLine(r.src)
		if len(line) > 0 {
			r.process(line)
		}
		if err != nil {
			r.err = err
			if r.pendingEvent != "" {
				r.out.WriteString(r.pendingEvent + "\n")
				r.pendingEvent = ""
			}
		}
	}
	if r.out.Len() > 0 {
		return r.out.Read(p)
	}
	return 0, r.err
}

// readLine reads one line with its terminator, of any length up to
// sseMaxLine.
func readLine(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > sseMaxLine {
			return "", fmt.Errorf("sse line longer than %d bytes", sseMaxLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return string(buf), err
	}
}

func (r *sseRewriter) process(line string) {
	body := strings.TrimRight(line, "\r\n")
	eol := line[len(body):]
	switch {
	case strings.HasPrefix(body, "event:"):
		if r.pendingEvent != "" {
			r.out.WriteString(r.pendingEvent + eol)
		}
		r.pendingEvent = body
		return
	case strings.HasPrefix(body, "data:"):
		data := strings.TrimPrefix(strings.TrimPrefix(body, "data:"), " ")
		events := r.transform(data, len(body) > sseSplitOver)
		for i, ev := range events {
			if i > 0 {
				r.out.WriteString("\n") // end the previous event
			}
			if ev.event != "" {
				r.out.WriteString("event: " + ev.event + "\n")
			} else if i == 0 && r.pendingEvent != "" {
				r.out.WriteString(r.pendingEvent + "\n")
			}
			r.out.WriteString("data: " + ev.data + eol)
		}
		r.pendingEvent = ""
		return
	}
	if r.pendingEvent != "" {
		r.out.WriteString(r.pendingEvent + "\n")
		r.pendingEvent = ""
	}
	if len(body) > sseSplitOver {
		return // a comment or field line langchaingo would choke on and then ignore
	}
	r.out.WriteString(line)
}

type sseEvent struct {
	event string // "" keeps the incoming event line, if any
	data  string
}

func (r *sseRewriter) transform(data string, long bool) []sseEvent {
	if r.anthropic {
		return r.transformAnthropic(data, long)
	}
	if !long {
		return []sseEvent{{data: data}}
	}
	return splitOpenAIChunk(data)
}

func (r *sseRewriter) transformAnthropic(data string, long bool) []sseEvent {
	keep := []sseEvent{{data: data}}
	var ev struct {
		Type         string `json:"type"`
		Index        *int   `json:"index"`
		ContentBlock struct {
			Type string `json:"type"`
		} `json:"content_block"`
		Delta map[string]json.RawMessage `json:"delta"`
	}
	if json.Unmarshal([]byte(data), &ev) != nil || ev.Index == nil {
		return keep
	}
	idx := *ev.Index
	switch ev.Type {
	case "content_block_start":
		if ev.ContentBlock.Type == "tool_use" {
			r.tools[idx] = &strings.Builder{}
		}
		return keep
	case "content_block_delta":
		var dt, partial string
		_ = json.Unmarshal(ev.Delta["type"], &dt)
		if b, ok := r.tools[idx]; ok && dt == "input_json_delta" {
			_ = json.Unmarshal(ev.Delta["partial_json"], &partial)
			b.WriteString(partial)
			return nil
		}
		if !long {
			return keep
		}
		for _, field := range []string{"text", "thinking"} {
			var s string
			if json.Unmarshal(ev.Delta[field], &s) != nil || s == "" {
				continue
			}
			var out []sseEvent
			for _, p := range splitText(s, ssePiece) {
				out = append(out, anthropicDelta(idx, dt, field, p))
			}
			return out
		}
		return keep
	case "content_block_stop":
		b, ok := r.tools[idx]
		if !ok {
			return keep
		}
		delete(r.tools, idx)
		raw := b.String()
		var out []sseEvent
		if strings.TrimSpace(raw) != "" {
			for _, p := range splitText(wrapMalformed(raw), ssePiece) {
				out = append(out, anthropicDelta(idx, "input_json_delta", "partial_json", p))
			}
		}
		return append(out, sseEvent{event: "content_block_stop", data: data})
	}
	return keep
}

func anthropicDelta(index int, deltaType, field, value string) sseEvent {
	b, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": index,
		"delta": map[string]any{"type": deltaType, field: value}})
	return sseEvent{event: "content_block_delta", data: string(b)}
}

// splitOpenAIChunk splits one chat.completion.chunk into several whose
// content, reasoning_content and tool-call argument pieces each stay small.
// Continuation pieces of a tool call carry only its index and arguments,
// as OpenAI streams them. The finish reason and usage go on the last chunk.
// A chunk it does not understand is returned unchanged.
func splitOpenAIChunk(data string) []sseEvent {
	keep := []sseEvent{{data: data}}
	dec := json.NewDecoder(strings.NewReader(data))
	dec.UseNumber()
	var chunk map[string]any
	if dec.Decode(&chunk) != nil {
		return keep
	}
	choices, _ := chunk["choices"].([]any)
	if len(choices) != 1 {
		return keep
	}
	choice, _ := choices[0].(map[string]any)
	delta, _ := choice["delta"].(map[string]any)
	if delta == nil {
		return keep
	}
	base := map[string]any{}
	for k, v := range chunk {
		if k != "choices" && k != "usage" {
			base[k] = v
		}
	}
	var out []sseEvent
	emit := func(d map[string]any, last bool) {
		c := map[string]any{"index": choice["index"], "delta": d, "finish_reason": nil}
		m := map[string]any{"choices": []any{c}}
		for k, v := range base {
			m[k] = v
		}
		if last {
			c["finish_reason"] = choice["finish_reason"]
			if u, ok := chunk["usage"]; ok {
				m["usage"] = u
			}
		}
		b, err := json.Marshal(m)
		if err == nil {
			out = append(out, sseEvent{data: string(b)})
		}
	}
	rest := map[string]any{}
	for k, v := range delta {
		rest[k] = v
	}
	for _, field := range []string{"content", "reasoning_content"} {
		s, ok := rest[field].(string)
		if !ok || s == "" {
			continue
		}
		delete(rest, field)
		for _, p := range splitText(s, ssePiece) {
			d := map[string]any{field: p}
			if role, ok := rest["role"]; ok {
				d["role"] = role
				delete(rest, "role")
			}
			emit(d, false)
		}
	}
	if tcs, ok := rest["tool_calls"].([]any); ok {
		delete(rest, "tool_calls")
		for _, tcv := range tcs {
			tc, _ := tcv.(map[string]any)
			fn, _ := tc["function"].(map[string]any)
			args, _ := fn["arguments"].(string)
			pieces := splitText(args, ssePiece)
			head := map[string]any{}
			for k, v := range tc {
				head[k] = v
			}
			headFn := map[string]any{}
			for k, v := range fn {
				headFn[k] = v
			}
			headFn["arguments"] = pieces[0]
			head["function"] = headFn
			emit(map[string]any{"tool_calls": []any{head}}, false)
			for _, p := range pieces[1:] {
				emit(map[string]any{"tool_calls": []any{map[string]any{
					"index": tc["index"], "function": map[string]any{"arguments": p}}}}, false)
			}
		}
	}
	emit(rest, true)
	return out
}

// splitText cuts s into pieces of at most n bytes at rune boundaries;
// it returns one empty piece for an empty s.
func splitText(s string, n int) []string {
	if len(s) <= n {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
