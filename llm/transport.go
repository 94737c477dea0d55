package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
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

// TransportOpts configures NewTransportWith; zero fields mean what each
// field says.
type TransportOpts struct {
	// Provider is ProviderAnthropic, or ProviderOpenAI and
	// ProviderOpenAICompatible (which share a wire format).
	Provider string
	// MaxRetries bounds the retries of a request; 0 retries nothing.
	MaxRetries int
	// RequestTimeout bounds each try of a request: its headers and its
	// body, or, for a stream, each stretch without data. 0 means none.
	RequestTimeout time.Duration
	// Limiter paces requests and spreads a 429's pause to every request
	// sharing it; nil paces nothing.
	Limiter *Limiter
	// PromptCache marks Anthropic requests for prompt caching.
	PromptCache bool
	// Backoff spaces retries a response did not time itself; zero means
	// a 1s base and a 60s cap.
	Backoff Backoff
	// SleepFunc waits between tries; nil means a timer.
	SleepFunc func(context.Context, time.Duration) error
	// NowFunc reads the clock for retry-after dates; nil means time.Now.
	NowFunc func() time.Time
	// WaitFunc hears of every wait: each backoff before a retry, and each
	// wait of a second or more for the limiter.
	WaitFunc func(WaitInfo)
	// Redactor cleans error bodies; nil uses the keys of the environment.
	Redactor *Redactor
}

// WaitInfo describes a wait for a provider.
type WaitInfo struct {
	Provider string
	// Reason is the kind of failure waited out (KindRateLimit,
	// KindOverloaded, KindServer, KindReset, KindTimeout), or "pacing"
	// for llm.requests_per_minute.
	Reason string
	Wait   time.Duration
	// Retry is the number of the retry the wait precedes, from 1; 0 for
	// the limiter.
	Retry int
	// Status is the HTTP status that caused the wait, if any.
	Status int
	// Lost is the time the failed request took before this wait: with
	// Wait, the time the provider cost the caller.
	Lost time.Duration
	// Shared marks a limiter's wait (pacing, or another request's 429),
	// told before it starts to the waiting caller's own WaitFunc only, for
	// a caller that keeps time: a wait worth showing is reported apart,
	// once it ended (pacing) or by the request that got the 429.
	Shared bool
}

// minReportedPacing is the shortest limiter wait reported to WaitFunc:
// shorter ones are the normal spacing of requests, not worth a line.
const minReportedPacing = time.Second

// NewTransport returns an http.RoundTripper for langchaingo clients of the
// given provider that rewrites traffic around langchaingo v0.1.14's gaps,
// without retries, timeouts or caching; see NewTransportWith.
func NewTransport(base http.RoundTripper, provider string) http.RoundTripper {
	return NewTransportWith(base, &TransportOpts{Provider: provider})
}

// NewTransportWith returns the transport New installs in every provider
// model: it retries failed requests in place (each retry sends the same
// bytes), waits for the limiter, bounds each try by the request timeout,
// refuses to send a key over plain http to anything but loopback, marks
// Anthropic requests for prompt caching and failed tool results with
// is_error, reads OpenAI-compatible replies leniently, and rewrites traffic
// around langchaingo v0.1.14's gaps (see the package doc). base nil means
// http.DefaultTransport.
func NewTransportWith(base http.RoundTripper, opts *TransportOpts) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &guardTransport{base: base}
	if opts != nil {
		t.opts = *opts
	}
	t.anthropic = t.opts.Provider == ProviderAnthropic
	if t.opts.Backoff.Base <= 0 {
		t.opts.Backoff.Base = time.Second
	}
	if t.opts.Backoff.Max <= 0 {
		t.opts.Backoff.Max = time.Minute
	}
	if t.opts.SleepFunc == nil {
		t.opts.SleepFunc = sleepCtx
	}
	if t.opts.NowFunc == nil {
		t.opts.NowFunc = time.Now
	}
	if t.opts.Redactor == nil {
		t.opts.Redactor = NewEnvRedactor(nil)
	}
	return t
}

type guardTransport struct {
	base      http.RoundTripper
	opts      TransportOpts
	anthropic bool
}

// failure is one failed try.
type failure struct {
	kind   string
	status int
	retry  bool
	header http.Header
	msg    string
	err    error
}

func (t *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	info := callInfoFrom(ctx)
	if err := checkKey(req); err != nil {
		return nil, err
	}
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s request: %w", t.opts.Provider, err)
		}
		if t.anthropic && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/messages") {
			body = rewriteAnthropicRequest(body, t.opts.PromptCache)
		}
	}
	for n := 0; ; n++ {
		if l := t.opts.Limiter; l != nil {
			waited, why, err := l.Wait(ctx)
			if err != nil {
				return nil, err
			}
			// A pause for another request's 429 was announced, before
			// it, by the request that got the 429: announced again
			// after it ended, one 429 would read as two waits.
			if waited >= minReportedPacing && why != KindRateLimit {
				t.report(ctx, WaitInfo{Reason: why, Wait: waited})
			}
		}
		began := time.Now()
		resp, f := t.try(ctx, req, body, info)
		if f == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if !f.retry || n >= t.opts.MaxRetries {
			perr := &ProviderError{Provider: t.opts.Provider, Status: f.status, Kind: f.kind, Message: f.msg,
				Requests: n + 1, Retryable: f.retry, Err: f.err}
			info.fail(perr)
			return nil, perr
		}
		wait, timed := retryAfter(f.header, f.status, t.opts.NowFunc())
		if !timed {
			wait = t.opts.Backoff.Delay(n)
		}
		if f.kind == KindRateLimit && t.opts.Limiter != nil {
			// A 429 is about the account, not this request: everyone
			// sharing the limiter holds back.
			t.opts.Limiter.Pause(wait)
		}
		t.report(ctx, WaitInfo{Reason: f.kind, Wait: wait, Retry: n + 1, Status: f.status, Lost: time.Since(began)})
		if err := t.opts.SleepFunc(ctx, wait); err != nil {
			return nil, err
		}
	}
}

func (t *guardTransport) report(ctx context.Context, w WaitInfo) {
	w.Provider = t.opts.Provider
	if t.opts.WaitFunc != nil {
		t.opts.WaitFunc(w)
	}
	tellCaller(ctx, w)
}

// tellCaller tells the WithWaitFunc funcs of ctx of w.
func tellCaller(ctx context.Context, w WaitInfo) {
	if f, ok := ctx.Value(waitKey{}).(func(WaitInfo)); ok && f != nil {
		f(w)
	}
}

type waitKey struct{}

// WithWaitFunc returns a context whose model calls also tell f of each
// wait for the provider (as Opts.WaitFunc hears of every call's): a caller
// learns which of its calls waits. The funcs of ctx are told too, first.
func WithWaitFunc(ctx context.Context, f func(WaitInfo)) context.Context {
	if prev, ok := ctx.Value(waitKey{}).(func(WaitInfo)); ok && prev != nil {
		next := f
		f = func(w WaitInfo) {
			prev(w)
			next(w)
		}
	}
	return context.WithValue(ctx, waitKey{}, f)
}

// try sends body once under the request timeout.
func (t *guardTransport) try(ctx context.Context, req *http.Request, body []byte, info *callInfo) (*http.Response, *failure) {
	actx, cancel := context.WithCancelCause(ctx)
	var timer *time.Timer
	if d := t.opts.RequestTimeout; d > 0 {
		timer = time.AfterFunc(d, func() { cancel(errRequestTimeout) })
	}
	stop := func() {
		if timer != nil {
			timer.Stop()
		}
		cancel(nil)
	}
	r := req.Clone(actx)
	if r.Header.Get("Authorization") == "Bearer "+placeholderKey {
		// langchaingo needs a key; an openai-compatible server without
		// llm.api_key_env gets none.
		r.Header.Del("Authorization")
	}
	if req.Body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		stop()
		return nil, t.lost(actx, err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		stop()
		kind, retry := kindOfStatus(resp.StatusCode)
		return nil, &failure{kind: kind, status: resp.StatusCode, retry: retry, header: resp.Header,
			msg: t.opts.Redactor.Redact(errorMessage(data))}
	}
	if t.opts.Limiter != nil {
		// A reply saying nothing is left until a reset pauses everyone
		// until then, before the next request earns a 429.
		if wait, ok := retryAfter(resp.Header, resp.StatusCode, t.opts.NowFunc()); ok {
			t.opts.Limiter.Pause(wait)
		}
	}
	if resp.Body == nil {
		stop()
		return resp, nil
	}
	br := bufio.NewReaderSize(resp.Body, 4096)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		skipComments(br)
	}
	head, _ := br.Peek(16)
	head = bytes.TrimLeft(head, " \t\r\n")
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") ||
		bytes.HasPrefix(head, []byte("data:")) || bytes.HasPrefix(head, []byte("event:")) || bytes.HasPrefix(head, []byte(":"))
	if sse {
		// A stream makes progress as long as data comes: each read
		// restarts the timeout.
		pb := &progressBody{r: br, c: resp.Body, timer: timer, timeout: t.opts.RequestTimeout, stop: stop, ctx: actx,
			info: info, provider: t.opts.Provider}
		resp.Body = &sseRewriter{src: bufio.NewReaderSize(pb, 4096), closer: pb, anthropic: t.anthropic,
			tools: map[int]*strings.Builder{}, info: info}
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
		return resp, nil
	}
	data, err := io.ReadAll(br)
	resp.Body.Close()
	stop()
	if err != nil {
		return nil, t.lost(actx, err)
	}
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("<")) {
		// A web page, not the API: asking again changes nothing.
		return nil, &failure{kind: KindRequest, status: resp.StatusCode,
			msg: "the reply is a web page, not the API's JSON: check the provider's base URL (the API's root)"}
	}
	if !json.Valid(data) {
		// A body that ended cleanly but early, as when a proxy closes
		// the connection: the reply never came whole, so the request is
		// tried again like any reply lost on the way.
		return nil, &failure{kind: KindReset, retry: true,
			msg: fmt.Sprintf("the reply's body ended before its JSON did (%d bytes)", len(data))}
	}
	if f := errorInReply(data); f != nil {
		// Gateways send an upstream failure with status 200.
		f.msg = t.opts.Redactor.Redact(f.msg)
		return nil, f
	}
	if t.anthropic {
		data = fixAnthropicMessage(data)
	} else {
		data = fixOpenAIMessage(data)
	}
	info.sawUsage(hasUsage(data))
	resp.Body = io.NopCloser(bytes.NewReader(data))
	resp.ContentLength = int64(len(data))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// skipComments reads past the blank lines and SSE comment lines (": …")
// before a reply: gateways keep a slow reply that is not streamed alive
// with them, ahead of its JSON.
func skipComments(br *bufio.Reader) {
	for {
		b, err := br.Peek(1)
		if err != nil {
			return
		}
		switch b[0] {
		case ':':
			if _, err := br.ReadString('\n'); err != nil {
				return
			}
		case ' ', '\t', '\r', '\n':
			_, _ = br.ReadByte()
		default:
			return
		}
	}
}

// errorInReply returns the failure a reply of status 200 reports in its
// body, as gateways report an upstream one: {"type": "error", "error":
// {"type": "overloaded_error", …}} (Anthropic's shape), {"error":
// {"code": 502, "message": …}} or {"error": "text"}; nil for a reply. A
// failure it cannot place is taken for the server's, and retried.
func errorInReply(data []byte) *failure {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Choices json.RawMessage `json:"choices"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(data, &v) != nil || len(v.Error) == 0 || string(v.Error) == "null" || v.Choices != nil || v.Content != nil {
		return nil
	}
	f := &failure{kind: KindServer, retry: true, msg: errorMessage(data)}
	var e struct {
		Type string          `json:"type"`
		Code json.RawMessage `json:"code"`
	}
	if json.Unmarshal(v.Error, &e) != nil {
		return f
	}
	if code, err := strconv.Atoi(strings.Trim(string(e.Code), `"`)); err == nil && code >= 400 && code < 600 {
		f.kind, f.retry = kindOfStatus(code)
		f.status = code
		return f
	}
	switch e.Type {
	case "", "api_error", "server_error", "timeout_error":
	case "overloaded_error":
		f.kind = KindOverloaded
	case "rate_limit_error":
		f.kind = KindRateLimit
	default:
		// authentication_error, invalid_request_error, not_found_error:
		// the request itself is wrong, and asking again changes nothing.
		f.kind, f.retry = KindRequest, false
	}
	return f
}

// lost classifies a try that got no complete response.
func (t *guardTransport) lost(actx context.Context, err error) *failure {
	if errors.Is(context.Cause(actx), errRequestTimeout) {
		return &failure{kind: KindTimeout, retry: true, err: errRequestTimeout,
			msg: fmt.Sprintf("no complete response within llm.request_timeout (%s)", t.opts.RequestTimeout)}
	}
	return &failure{kind: KindReset, retry: true, err: err, msg: t.opts.Redactor.Redact(err.Error())}
}

// progressBody is a streamed response body whose timeout restarts with
// every read that brings data.
type progressBody struct {
	r        io.Reader
	c        io.Closer
	timer    *time.Timer
	timeout  time.Duration
	stop     func()
	ctx      context.Context
	info     *callInfo
	provider string
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 && b.timer != nil {
		b.timer.Reset(b.timeout)
	}
	if err != nil && err != io.EOF {
		kind := KindReset
		if errors.Is(context.Cause(b.ctx), errRequestTimeout) {
			kind, err = KindTimeout, fmt.Errorf("the stream stalled for llm.request_timeout (%s): %w", b.timeout, errRequestTimeout)
		}
		// Part of the reply was handed on already, so the request cannot
		// be retried in place.
		b.info.fail(&ProviderError{Provider: b.provider, Kind: kind, Message: err.Error(), Requests: 1, Err: err})
	}
	return n, err
}

func (b *progressBody) Close() error {
	err := b.c.Close()
	b.stop()
	return err
}

// checkKey refuses a request that would send a key over plain http to a
// host other than loopback.
func checkKey(req *http.Request) error {
	if req.URL.Scheme != "http" || IsLoopback(req.URL.Hostname()) {
		return nil
	}
	for _, h := range []string{"Authorization", "X-Api-Key", "Api-Key"} {
		v := req.Header.Get(h)
		if v != "" && v != "Bearer "+placeholderKey {
			return fmt.Errorf("%w: refusing to send an API key over plain http to %s; use https, or a loopback address", ErrInsecureKey, req.URL.Host)
		}
	}
	return nil
}

// ErrInsecureKey is wrapped by the error of a request that would send a
// key over plain http to a host other than loopback.
var ErrInsecureKey = errors.New("insecure API key transport")

// IsLoopback reports whether host (a name or an address, an IPv6 one
// bracketed or not) names the loopback interface: where a key may go over
// plain http, since it never leaves the machine.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// isErrorMarker starts the content of a failed tool result on its way to
// the transport, which turns it into Anthropic's is_error (MarkToolError).
const isErrorMarker = "\x00taskloom:is_error\x00"

// MarkToolError marks the content of a failed tool result, so that the
// Anthropic request says is_error: true. Providers without the field (and
// the scripted model) get the content without the mark.
func MarkToolError(content string) string { return isErrorMarker + content }

// rewriteAnthropicRequest reshapes a messages request: consecutive
// messages of one role become one turn (the guarded model splits
// multi-part messages, since langchaingo sends only the first part),
// marked tool results get is_error, and with cache the stable prefix gets
// cache_control breakpoints: the tools, the system prompt, the first user
// message (the task), and the newest message, so that each turn reads the
// conversation so far from the cache. That is Anthropic's maximum of four.
// A body it does not understand is sent as it is.
func rewriteAnthropicRequest(body []byte, cache bool) []byte {
	var payload map[string]json.RawMessage
	if json.Unmarshal(body, &payload) != nil {
		return body
	}
	type message struct {
		Role    string                       `json:"role"`
		Content []map[string]json.RawMessage `json:"content"`
	}
	var msgs []message
	if raw, ok := payload["messages"]; !ok || json.Unmarshal(raw, &msgs) != nil {
		return body
	}
	merged := msgs[:0]
	for _, m := range msgs {
		if n := len(merged); n > 0 && merged[n-1].Role == m.Role {
			merged[n-1].Content = append(merged[n-1].Content, m.Content...)
			continue
		}
		merged = append(merged, m)
	}
	for _, m := range merged {
		for _, b := range m.Content {
			var typ, content string
			_ = json.Unmarshal(b["type"], &typ)
			if typ != "tool_result" || json.Unmarshal(b["content"], &content) != nil {
				continue
			}
			if rest, ok := strings.CutPrefix(content, isErrorMarker); ok {
				b["content"], _ = json.Marshal(rest)
				b["is_error"] = json.RawMessage("true")
			}
		}
	}
	ephemeral := json.RawMessage(`{"type":"ephemeral"}`)
	if cache {
		var system string
		if json.Unmarshal(payload["system"], &system) == nil && system != "" {
			payload["system"], _ = json.Marshal([]map[string]any{{"type": "text", "text": system, "cache_control": ephemeral}})
		}
		var tools []map[string]json.RawMessage
		if json.Unmarshal(payload["tools"], &tools) == nil && len(tools) > 0 {
			tools[len(tools)-1]["cache_control"] = ephemeral
			payload["tools"], _ = json.Marshal(tools)
		}
		if len(merged) > 0 && len(merged[0].Content) > 0 {
			merged[0].Content[0]["cache_control"] = ephemeral
		}
		if n := len(merged); n > 1 && len(merged[n-1].Content) > 0 {
			last := merged[n-1].Content
			last[len(last)-1]["cache_control"] = ephemeral
		}
	}
	b, err := json.Marshal(merged)
	if err != nil {
		return body
	}
	payload["messages"] = b
	out, err := json.Marshal(payload)
	if err != nil {
		return body
	}
	return out
}

// fixOpenAIMessage reads a chat.completion leniently: tool-call arguments
// sent as a JSON object or array (some compatible servers do) become the
// string langchaingo expects. It returns body unchanged when there is
// nothing to fix.
func fixOpenAIMessage(body []byte) []byte {
	var resp map[string]json.RawMessage
	if json.Unmarshal(body, &resp) != nil {
		return body
	}
	var choices []map[string]json.RawMessage
	if json.Unmarshal(resp["choices"], &choices) != nil {
		return body
	}
	changed := false
	for _, c := range choices {
		var msg map[string]json.RawMessage
		if json.Unmarshal(c["message"], &msg) != nil {
			continue
		}
		var calls []map[string]json.RawMessage
		if json.Unmarshal(msg["tool_calls"], &calls) != nil {
			continue
		}
		fixed := false
		for _, tc := range calls {
			var fn map[string]json.RawMessage
			if json.Unmarshal(tc["function"], &fn) != nil {
				continue
			}
			args := bytes.TrimSpace(fn["arguments"])
			if len(args) == 0 || args[0] == '"' || string(args) == "null" {
				continue
			}
			fn["arguments"], _ = json.Marshal(string(args))
			tc["function"], _ = json.Marshal(fn)
			fixed = true
		}
		if fixed {
			msg["tool_calls"], _ = json.Marshal(calls)
			c["message"], _ = json.Marshal(msg)
			changed = true
		}
	}
	if !changed {
		return body
	}
	resp["choices"], _ = json.Marshal(choices)
	out, err := json.Marshal(resp)
	if err != nil {
		return body
	}
	return out
}

// hasUsage reports whether a response body carries a usage object.
func hasUsage(body []byte) bool {
	var v struct {
		Usage json.RawMessage `json:"usage"`
	}
	return json.Unmarshal(body, &v) == nil && len(v.Usage) > 0 && string(v.Usage) != "null"
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
	info         *callInfo                // told when a usage object streams by
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
		if strings.Contains(data, `"usage"`) {
			r.info.sawUsage(hasStreamUsage(data))
		}
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

// hasStreamUsage reports whether a stream event carries usage: at the top
// (OpenAI's last chunk, Anthropic's message_delta) or in message_start's
// message.
func hasStreamUsage(data string) bool {
	if hasUsage([]byte(data)) {
		return true
	}
	var v struct {
		Message json.RawMessage `json:"message"`
	}
	return json.Unmarshal([]byte(data), &v) == nil && len(v.Message) > 0 && hasUsage(v.Message)
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
