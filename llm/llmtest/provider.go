package llmtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmc/langchaingo/llms"
)

// APIs the fake Provider speaks.
const (
	APIAnthropic = "anthropic" // POST …/v1/messages
	APIOpenAI    = "openai"    // POST …/chat/completions
)

// TruncatedPrefix starts the text of every reply the Provider cuts at
// max_tokens. Assistant messages starting with it do not count towards
// Turn.Assistants, so a script keeps its place when the client asks the
// model to go on.
const TruncatedPrefix = "[llmtest: cut at max_tokens] "

// Turn is one model request as the Provider parsed it.
type Turn struct {
	API   string
	Model string
	// FirstUser is the text of the first user message, its text blocks
	// joined with "\n".
	FirstUser string
	// Assistants counts the assistant messages in the request, leaving
	// out replies the Provider cut at max_tokens.
	Assistants int
	Stream     bool
	MaxTokens  int
	// Key names the turn: the same conversation at the same point.
	Key string
}

// Reply is what the model says to a turn.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
}

// ReplyFunc answers a turn.
type ReplyFunc func(Turn) (Reply, error)

// Fault is what goes wrong with one request. The zero Fault answers
// normally.
type Fault struct {
	// Status answers with this HTTP status and an error body instead of a
	// reply; Header is sent with it (retry-after, rate-limit headers).
	Status int
	Header http.Header
	// Message is the error body's message; Body, when set, is sent
	// verbatim instead of the usual {"error": {...}} shape.
	Message string
	Body    string
	// Reset closes the connection without answering.
	Reset bool
	// Stall holds the answer back this long, or until the client gives
	// up, in which case nothing is answered.
	Stall time.Duration
	// Truncate answers with the reply's first tool call cut in the middle
	// of its arguments and stop reason max_tokens (finish_reason length).
	Truncate bool
	// ArgsAsObject sends OpenAI tool arguments as a JSON object, as some
	// compatible servers do.
	ArgsAsObject bool
	// NoUsage leaves the usage out.
	NoUsage bool
	// CutBody answers 200 with the first half of the reply's body only, a
	// complete HTTP response whose JSON is not: a proxy that closed the
	// connection early does this.
	CutBody bool
	// Keepalive sends SSE comment lines before a reply that is not
	// streamed, as gateways keep a slow one alive.
	Keepalive bool
}

// Failed reports whether the fault keeps the request from being answered
// with a reply.
func (f Fault) Failed() bool { return f.Status != 0 || f.Reset || f.Stall > 0 || f.CutBody }

// FaultFunc picks the fault of a request: try counts the earlier
// requests of the same turn (0 for the first).
type FaultFunc func(t Turn, try int) Fault

// Usage is what the Provider reported, summed over the replies it sent.
type Usage struct {
	InputTokens      int
	OutputTokens     int
	CacheReadTokens  int
	CacheWriteTokens int
	// Replies counts the replies sent; MissingUsage those sent without
	// usage.
	Replies      int
	MissingUsage int
}

// Call is one request the Provider received.
type Call struct {
	Turn   Turn
	Try    int
	Fault  Fault
	Header http.Header
	Body   []byte
	// Answered: a reply was sent in full.
	Answered bool
}

// Provider is a fake model provider for tests. It speaks Anthropic's
// messages API and OpenAI's chat completions, streamed and not, answers
// each turn with a ReplyFunc, injects faults from a FaultFunc, reports
// usage (one token per four bytes of the request's JSON), and simulates
// Anthropic's prompt cache: a prefix up to a cache_control breakpoint that
// an earlier request wrote is read from the cache.
type Provider struct {
	*httptest.Server

	reply ReplyFunc
	fault FaultFunc

	mu    sync.Mutex
	calls []Call
	tries map[string]int
	usage Usage
	cache map[string]bool
}

// NewProvider starts a Provider; it is closed in t.Cleanup. fault may be
// nil.
func NewProvider(t testing.TB, reply ReplyFunc, fault FaultFunc) *Provider {
	t.Helper()
	p := &Provider{reply: reply, fault: fault, tries: map[string]int{}, cache: map[string]bool{}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

// Calls returns the requests received so far.
func (p *Provider) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

// Usage returns the usage reported so far.
func (p *Provider) Usage() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usage
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req wireRequest
	api := APIOpenAI
	if strings.HasSuffix(r.URL.Path, "/v1/messages") {
		api = APIAnthropic
	}
	if r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil {
		writeError(w, api, http.StatusBadRequest, "llmtest: not a JSON POST", "")
		return
	}
	turn := req.turn(api)
	p.mu.Lock()
	try := p.tries[turn.Key]
	p.tries[turn.Key]++
	var f Fault
	if p.fault != nil {
		f = p.fault(turn, try)
	}
	i := len(p.calls)
	p.calls = append(p.calls, Call{Turn: turn, Try: try, Fault: f, Header: r.Header.Clone(), Body: body})
	p.mu.Unlock()

	switch {
	case f.Reset:
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic("llmtest: the server cannot hijack connections")
		}
		conn, _, err := hj.Hijack()
		if err == nil {
			conn.Close()
		}
		return
	case f.Stall > 0:
		select {
		case <-r.Context().Done():
			return
		case <-time.After(f.Stall):
		}
	}
	if f.Status != 0 {
		for k, vs := range f.Header {
			w.Header()[k] = vs
		}
		writeError(w, api, f.Status, f.Message, f.Body)
		return
	}
	rep, err := p.reply(turn)
	if err != nil {
		writeError(w, api, http.StatusBadRequest, "llmtest: "+err.Error(), "")
		return
	}
	u := Usage{OutputTokens: max(1, tokens(rep.Text)), Replies: 1}
	for _, tc := range rep.ToolCalls {
		u.OutputTokens += tokens(tc.Name) + tokens(tc.Arguments)
	}
	p.mu.Lock()
	u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens = p.input(api, body)
	p.mu.Unlock()
	if f.NoUsage {
		u = Usage{Replies: 1, MissingUsage: 1}
	}
	if f.Truncate {
		rep = truncate(rep)
	}
	var resp Response
	switch {
	case api == APIAnthropic && turn.Stream:
		resp = anthropicStream(rep, f, u)
	case api == APIAnthropic:
		resp = anthropicMessage(rep, f, u)
	case turn.Stream:
		resp = openAIStream(rep, f, u)
	default:
		resp = openAIMessage(rep, f, u)
	}
	w.Header().Set("Content-Type", resp.ContentType)
	if f.CutBody {
		_, _ = io.WriteString(w, resp.Body[:len(resp.Body)/2])
		return
	}
	if f.Keepalive && !turn.Stream {
		_, _ = io.WriteString(w, ": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n")
	}
	if _, err := io.WriteString(w, resp.Body); err != nil {
		return
	}
	p.mu.Lock()
	p.calls[i].Answered = true
	p.usage.InputTokens += u.InputTokens
	p.usage.OutputTokens += u.OutputTokens
	p.usage.CacheReadTokens += u.CacheReadTokens
	p.usage.CacheWriteTokens += u.CacheWriteTokens
	p.usage.Replies++
	p.usage.MissingUsage += u.MissingUsage
	p.mu.Unlock()
}

func tokens(s string) int { return (len(s) + 3) / 4 }

// wireRequest is the part of either API's request body the Provider reads.
type wireRequest struct {
	Model     string            `json:"model"`
	System    json.RawMessage   `json:"system"`
	Tools     []json.RawMessage `json:"tools"`
	Stream    bool              `json:"stream"`
	MaxTokens int               `json:"max_tokens"`
	MaxCompl  int               `json:"max_completion_tokens"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// texts returns the text of a message's content: a string, or the text
// blocks of a list.
func texts(content json.RawMessage) []string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []string{s}
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &blocks)
	var out []string
	for _, b := range blocks {
		if b.Type == "text" {
			out = append(out, b.Text)
		}
	}
	return out
}

func (r wireRequest) turn(api string) Turn {
	t := Turn{API: api, Model: r.Model, Stream: r.Stream, MaxTokens: max(r.MaxTokens, r.MaxCompl)}
	first := true
	for _, m := range r.Messages {
		switch m.Role {
		case "user":
			if first {
				first = false
				t.FirstUser = strings.Join(texts(m.Content), "\n")
			}
		case "assistant":
			if tx := texts(m.Content); len(tx) > 0 && strings.HasPrefix(tx[0], TruncatedPrefix) {
				continue
			}
			t.Assistants++
		}
	}
	sum := sha256.Sum256([]byte(t.Model + "\x00" + t.FirstUser))
	t.Key = fmt.Sprintf("%s/%d", hex.EncodeToString(sum[:8]), t.Assistants)
	return t
}

// input counts a request's input tokens: for Anthropic, the prefix up to
// the furthest breakpoint an earlier request cached is read from the
// cache, the rest up to the last breakpoint is written to it, and only
// what follows is plain input. The caller holds p.mu.
func (p *Provider) input(api string, body []byte) (in, read, write int) {
	var req struct {
		System   json.RawMessage              `json:"system"`
		Tools    []map[string]json.RawMessage `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return tokens(string(body)), 0, 0
	}
	// The prompt in cache order (tools, system, messages), one unit per
	// block, each marked when it is a breakpoint.
	type unit struct {
		text string
		bp   bool
	}
	var units []unit
	add := func(role string, block map[string]json.RawMessage) {
		_, bp := block["cache_control"]
		delete(block, "cache_control")
		b, _ := json.Marshal(block)
		units = append(units, unit{role + string(b), bp && api == APIAnthropic})
	}
	for _, t := range req.Tools {
		add("tool", t)
	}
	var sys []map[string]json.RawMessage
	if json.Unmarshal(req.System, &sys) != nil {
		var s string
		if json.Unmarshal(req.System, &s) == nil && s != "" {
			sys = []map[string]json.RawMessage{{"text": req.System}}
		}
	}
	for _, b := range sys {
		add("system", b)
	}
	for _, m := range req.Messages {
		var blocks []map[string]json.RawMessage
		if json.Unmarshal(m.Content, &blocks) != nil {
			blocks = []map[string]json.RawMessage{{"content": m.Content}}
		}
		for _, b := range blocks {
			add(m.Role, b)
		}
	}
	// As Anthropic does, a hit is looked for at every block boundary
	// before the last breakpoint, while only breakpoints are written.
	total, hit, last := 0, 0, 0
	h := sha256.New()
	var written []string
	for _, u := range units {
		total += tokens(u.text)
		h.Write([]byte(u.text))
		key := hex.EncodeToString(h.Sum(nil))
		if p.cache[key] {
			hit = total
		}
		if u.bp {
			written = append(written, key)
			last = total
		}
	}
	for _, k := range written {
		p.cache[k] = true
	}
	hit = min(hit, last)
	return total - last, hit, last - hit
}

// truncate cuts the reply's first tool call in the middle of its
// arguments and drops the calls after it.
func truncate(r Reply) Reply {
	out := Reply{Text: TruncatedPrefix + r.Text}
	if len(r.ToolCalls) > 0 {
		tc := r.ToolCalls[0]
		tc.Arguments = tc.Arguments[:len(tc.Arguments)/2]
		out.ToolCalls = []ToolCall{tc}
	}
	return out
}

func writeError(w http.ResponseWriter, api string, status int, msg, body string) {
	if body == "" {
		typ := map[int]string{429: "rate_limit_error", 529: "overloaded_error", 500: "api_error", 400: "invalid_request_error"}[status]
		if typ == "" {
			typ = "api_error"
		}
		if msg == "" {
			msg = http.StatusText(status)
			if status == 529 {
				msg = "Overloaded"
			}
		}
		var v any = map[string]any{"error": map[string]any{"type": typ, "message": msg}}
		if api == APIAnthropic {
			v = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
		}
		b, _ := json.Marshal(v)
		body = string(b)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func anthropicUsage(u Usage) map[string]any {
	return map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_read_input_tokens": u.CacheReadTokens, "cache_creation_input_tokens": u.CacheWriteTokens}
}

func anthropicStop(r Reply, f Fault) string {
	switch {
	case f.Truncate:
		return "max_tokens"
	case len(r.ToolCalls) > 0:
		return "tool_use"
	}
	return "end_turn"
}

func anthropicMessage(r Reply, f Fault, u Usage) Response {
	var content []any
	if r.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	for _, tc := range r.ToolCalls {
		var input any = json.RawMessage(tc.Arguments)
		if !json.Valid([]byte(tc.Arguments)) {
			input = tc.Arguments
		}
		content = append(content, map[string]any{"type": "tool_use", "id": tc.ID, "name": tc.Name, "input": input})
	}
	msg := map[string]any{"id": "msg_llmtest", "type": "message", "role": "assistant", "model": "llmtest",
		"content": content, "stop_reason": anthropicStop(r, f)}
	if !f.NoUsage {
		msg["usage"] = anthropicUsage(u)
	}
	return JSON(msg)
}

func anthropicStream(r Reply, f Fault, u Usage) Response {
	var blocks []AnthropicBlock
	if r.Text != "" {
		blocks = append(blocks, AnthropicText(r.Text))
	}
	for _, tc := range r.ToolCalls {
		blocks = append(blocks, AnthropicToolUse(tc.ID, tc.Name, tc.Arguments))
	}
	resp := AnthropicStream(0, blocks...)
	// AnthropicStream reports fixed usage and stop reasons: put this
	// reply's in.
	var b strings.Builder
	for _, ev := range strings.SplitAfter(resp.Body, "\n\n") {
		event, data, ok := strings.Cut(ev, "\ndata: ")
		if !ok {
			b.WriteString(ev)
			continue
		}
		var v map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &v) != nil {
			b.WriteString(ev)
			continue
		}
		switch v["type"] {
		case "message_start":
			m := v["message"].(map[string]any)
			if f.NoUsage {
				delete(m, "usage")
			} else {
				start := anthropicUsage(u)
				start["output_tokens"] = 1
				m["usage"] = start
			}
		case "message_delta":
			v["delta"] = map[string]any{"stop_reason": anthropicStop(r, f)}
			v["usage"] = map[string]any{"output_tokens": u.OutputTokens}
		}
		out, _ := json.Marshal(v)
		fmt.Fprintf(&b, "%s\ndata: %s\n\n", event, out)
	}
	return Response{ContentType: resp.ContentType, Body: b.String()}
}

func openAIFinish(r Reply, f Fault) string {
	switch {
	case f.Truncate:
		return "length"
	case len(r.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

func openAIUsage(u Usage) map[string]any {
	// OpenAI's prompt counts cached tokens too.
	prompt := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	return map[string]any{"prompt_tokens": prompt, "completion_tokens": u.OutputTokens, "total_tokens": prompt + u.OutputTokens,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.CacheReadTokens}}
}

func openAIMessage(r Reply, f Fault, u Usage) Response {
	msg := map[string]any{"role": "assistant", "content": r.Text}
	if len(r.ToolCalls) > 0 {
		var tcs []map[string]any
		for _, c := range r.ToolCalls {
			var args any = c.Arguments
			if f.ArgsAsObject && json.Valid([]byte(c.Arguments)) {
				args = json.RawMessage(c.Arguments)
			}
			tcs = append(tcs, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": args}})
		}
		msg["tool_calls"] = tcs
	}
	resp := map[string]any{
		"id": "chatcmpl-llmtest", "object": "chat.completion", "created": 1, "model": "llmtest",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": openAIFinish(r, f)}},
	}
	if !f.NoUsage {
		resp["usage"] = openAIUsage(u)
	}
	return JSON(resp)
}

func openAIStream(r Reply, f Fault, u Usage) Response {
	var chunks []string
	if r.Text != "" {
		chunks = append(chunks, OpenAIContentChunk(r.Text))
	}
	for i, tc := range r.ToolCalls {
		chunks = append(chunks, OpenAIToolStartChunk(i, tc.ID, tc.Name, tc.Arguments))
	}
	chunks = append(chunks, OpenAIFinishChunk(openAIFinish(r, f)))
	if !f.NoUsage {
		var b bytes.Buffer
		_ = json.NewEncoder(&b).Encode(map[string]any{"id": "chatcmpl-llmtest", "object": "chat.completion.chunk",
			"created": 1, "model": "llmtest", "choices": []any{}, "usage": openAIUsage(u)})
		chunks = append(chunks, strings.TrimSpace(b.String()))
	}
	return OpenAIStream(chunks...)
}

// RetriedEqual checks that every request answered with a fault was sent
// again byte for byte: the next request of its turn has the same body.
// It returns a description of the first that was not, or "".
func RetriedEqual(calls []Call) string {
	for i, c := range calls {
		if !c.Fault.Failed() {
			continue
		}
		found := false
		for _, d := range calls[i+1:] {
			if d.Turn.Key != c.Turn.Key {
				continue
			}
			if !bytes.Equal(c.Body, d.Body) {
				return fmt.Sprintf("request %d (turn %s, try %d) was retried with a different body", i, c.Turn.Key, c.Try)
			}
			found = true
			break
		}
		if !found {
			return fmt.Sprintf("request %d (turn %s, try %d) failed and was never retried", i, c.Turn.Key, c.Try)
		}
	}
	return ""
}

// ReplyFromModel answers each turn with what m answers to a request made
// of the turn's first user message and as many (empty) assistant messages
// as the turn has: the scripted model (llm.NewScripted) replays a session
// that way, so that a real client can be driven through a Provider by a
// script.
func ReplyFromModel(m llms.Model) ReplyFunc {
	return func(t Turn) (Reply, error) {
		msgs := []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, t.FirstUser)}
		for range t.Assistants {
			msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeAI, ""))
		}
		resp, err := m.GenerateContent(context.Background(), msgs)
		if err != nil {
			return Reply{}, err
		}
		c := resp.Choices[0]
		r := Reply{Text: c.Content}
		for _, tc := range c.ToolCalls {
			r.ToolCalls = append(r.ToolCalls, ToolCall{ID: tc.ID, Name: tc.FunctionCall.Name, Arguments: tc.FunctionCall.Arguments})
		}
		return r, nil
	}
}
