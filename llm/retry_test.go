package llm

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/llm/llmtest"
)

// newFakeClock returns a fake clock at the time the tests' Retry-After
// dates are written against.
func newFakeClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
}

// echo answers every turn with one write_to_file call.
func echo(llmtest.Turn) (llmtest.Reply, error) {
	return llmtest.Reply{Text: "Writing.", ToolCalls: []llmtest.ToolCall{{ID: "call_1", Name: "write_to_file", Arguments: `{"path":"a.go","content":"package a\n"}`}}}, nil
}

// faultsOnFirstTries answers the first tries of every turn with faults.
func faultsOnFirstTries(faults ...llmtest.Fault) llmtest.FaultFunc {
	return func(_ llmtest.Turn, try int) llmtest.Fault {
		if try < len(faults) {
			return faults[try]
		}
		return llmtest.Fault{}
	}
}

func retryAfterHeader(v string) http.Header { return http.Header{"Retry-After": {v}} }

type providerSetup struct {
	model llms.Model
	srv   *llmtest.Provider
	clock *testkit.Clock
	waits []WaitInfo
	mu    sync.Mutex
}

func (s *providerSetup) Waits() []WaitInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]WaitInfo(nil), s.waits...)
}

func setupProvider(t *testing.T, spec string, faults llmtest.FaultFunc, opts *Opts) *providerSetup {
	t.Helper()
	s := &providerSetup{clock: newFakeClock()}
	s.srv = llmtest.NewProvider(t, echo, faults)
	if opts == nil {
		opts = &Opts{}
	}
	o := *opts
	o.BaseURL = s.srv.URL
	if spec == "openai:gpt-4o" {
		o.BaseURL += "/v1"
	}
	o.GetenvFunc = testEnv
	o.SleepFunc, o.NowFunc = s.clock.Sleep, s.clock.Now
	o.Backoff = Backoff{Base: time.Second, Max: time.Minute, RandFunc: func() float64 { return 0.5 }}
	o.WaitFunc = func(w WaitInfo) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.waits = append(s.waits, w)
	}
	m, err := New(context.Background(), spec, &o)
	require.NoError(t, err)
	s.model = m
	return s
}

var bothProviders = []string{"anthropic:claude-sonnet-4-5", "openai:gpt-4o"}

// eachProvider runs test as a parallel subtest for each of bothProviders.
func eachProvider(t *testing.T, test func(t *testing.T, spec string)) {
	for _, spec := range bothProviders {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			test(t, spec)
		})
	}
}

func TestRetriesInPlace(t *testing.T) {
	t.Parallel()
	eachProvider(t, func(t *testing.T, spec string) {
		s := setupProvider(t, spec, faultsOnFirstTries(
			llmtest.Fault{Status: 429, Header: retryAfterHeader("3")},
			llmtest.Fault{Status: 429, Header: http.Header{"Retry-After-Ms": {"1500"}}},
			llmtest.Fault{Status: 529},
			llmtest.Fault{Status: 500},
			llmtest.Fault{Reset: true},
			llmtest.Fault{Status: 503, Header: retryAfterHeader("Wed, 01 Jan 2025 00:01:00 GMT")},
			llmtest.Fault{CutBody: true},
		), nil)
		resp, err := s.model.GenerateContent(context.Background(), userMsg("Task: T1"), llms.WithTools(testTools))
		require.NoError(t, err)
		require.Len(t, resp.Choices[0].ToolCalls, 1)

		calls := s.srv.Calls()
		require.Len(t, calls, 8, "seven faults, then the reply")
		require.Empty(t, llmtest.RetriedEqual(calls), "each retry sends the failed request's bytes")
		var reasons []string
		for _, w := range s.Waits() {
			reasons = append(reasons, w.Reason)
		}
		require.Equal(t, []string{KindRateLimit, KindRateLimit, KindOverloaded, KindServer, KindReset, KindServer, KindReset}, reasons)
		waits := s.clock.Waits()
		require.Equal(t, 3*time.Second, waits[0], "retry-after in seconds")
		require.Equal(t, 1500*time.Millisecond, waits[1], "retry-after-ms")
		require.Equal(t, 2*time.Second, waits[2], "full jitter: half of 2^2 s with the stubbed rand")
		require.Equal(t, 4*time.Second, waits[3])
		require.Equal(t, 8*time.Second, waits[4])
		require.Greater(t, waits[5], 40*time.Second, "a retry-after date is honoured")
	})
}

func TestRetriesExhausted(t *testing.T) {
	t.Parallel()
	eachProvider(t, func(t *testing.T, spec string) {
		always := func(llmtest.Turn, int) llmtest.Fault {
			return llmtest.Fault{Status: 529, Message: "Overloaded, key " + testAnthropicKey + " " + testOpenAIKey}
		}
		s := setupProvider(t, spec, always, &Opts{MaxRetries: 3})
		_, err := s.model.GenerateContent(context.Background(), userMsg("Task: T1"))
		require.ErrorIs(t, err, ErrRetriesExhausted)
		var perr *ProviderError
		require.ErrorAs(t, err, &perr)
		require.Equal(t, 529, perr.Status)
		require.Equal(t, 4, perr.Requests)
		require.Contains(t, err.Error(), "HTTP 529 (overloaded): Overloaded, key [REDACTED] [REDACTED]; gave up after 4 requests")
		require.NotContains(t, err.Error(), testAnthropicKey)
		require.NotContains(t, err.Error(), testOpenAIKey)
		require.Len(t, s.srv.Calls(), 4)
	})
}

func TestRequestErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"openai":  `{"error": {"message": "This model's maximum context length is 8192 tokens", "type": "invalid_request_error"}}`,
		"ollama":  `{"error": "model \"llama9\" not found, try pulling it first"}`,
		"vllm":    `{"object": "error", "message": "The model does not exist.", "type": "NotFoundError", "code": 404}`,
		"fastapi": `{"detail": [{"loc": ["body", "messages"], "msg": "field required", "type": "value_error.missing"}]}`,
		"text":    `upstream said no`,
	}
	want := map[string]string{
		"openai":  "This model's maximum context length is 8192 tokens",
		"ollama":  `model "llama9" not found, try pulling it first`,
		"vllm":    "NotFoundError: The model does not exist.",
		"fastapi": "field required",
		"text":    "upstream said no",
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := setupProvider(t, "openai:gpt-4o", faultsOnFirstTries(llmtest.Fault{Status: 400, Body: body}), nil)
			_, err := s.model.GenerateContent(context.Background(), userMsg("Task: T1"))
			var perr *ProviderError
			require.ErrorAs(t, err, &perr)
			require.False(t, errors.Is(err, ErrRetriesExhausted))
			require.Equal(t, KindRequest, perr.Kind)
			require.Equal(t, want[name], perr.Message)
			require.Len(t, s.srv.Calls(), 1, "a bad request is not retried")
		})
	}
}

func TestStallIsRetriedAfterTheRequestTimeout(t *testing.T) {
	t.Parallel()
	eachProvider(t, func(t *testing.T, spec string) {
		s := setupProvider(t, spec, faultsOnFirstTries(llmtest.Fault{Stall: time.Minute}),
			&Opts{RequestTimeout: 100 * time.Millisecond})
		resp, err := s.model.GenerateContent(context.Background(), userMsg("Task: T1"))
		require.NoError(t, err)
		require.Len(t, resp.Choices[0].ToolCalls, 1)
		require.Equal(t, KindTimeout, s.Waits()[0].Reason)
		require.Empty(t, llmtest.RetriedEqual(s.srv.Calls()))
	})
}

func TestStreamingProgressIsNotATimeout(t *testing.T) {
	t.Parallel()
	eachProvider(t, func(t *testing.T, spec string) {
		s := setupProvider(t, spec, nil, &Opts{RequestTimeout: time.Second})
		var chunks []string
		resp, err := s.model.GenerateContent(context.Background(), userMsg("Task: T1"), collect(&chunks))
		require.NoError(t, err)
		require.Equal(t, "Writing.", resp.Choices[0].Content)
		require.True(t, s.srv.Calls()[0].Turn.Stream)
		u := UsageOf(resp, spec)
		require.False(t, u.Estimated, "streamed usage is read")
		require.Equal(t, s.srv.Usage().OutputTokens, u.OutputTokens)
	})
}

func TestMaxTokensIsAskedFor(t *testing.T) {
	t.Parallel()
	eachProvider(t, func(t *testing.T, spec string) {
		s := setupProvider(t, spec, nil, nil)
		_, err := s.model.GenerateContent(context.Background(), userMsg("Task: T1"))
		require.NoError(t, err)
		require.Equal(t, DefaultMaxTokens, s.srv.Calls()[0].Turn.MaxTokens)
		s = setupProvider(t, spec, nil, &Opts{MaxTokens: 1234})
		_, err = s.model.GenerateContent(context.Background(), userMsg("Task: T1"))
		require.NoError(t, err)
		require.Equal(t, 1234, s.srv.Calls()[0].Turn.MaxTokens)
	})
}

func TestTruncatedReplyKeepsItsStopReason(t *testing.T) {
	t.Parallel()
	want := map[string]string{bothProviders[0]: "max_tokens", bothProviders[1]: "length"}
	eachProvider(t, func(t *testing.T, spec string) {
		s := setupProvider(t, spec, faultsOnFirstTries(llmtest.Fault{Truncate: true}), nil)
		resp, err := s.model.GenerateContent(context.Background(), userMsg("Task: T1"), llms.WithTools(testTools))
		require.NoError(t, err)
		c := resp.Choices[0]
		require.Equal(t, want[spec], c.StopReason)
		require.True(t, IsMaxTokens(c.StopReason))
		require.Error(t, ValidateToolCall(c.ToolCalls[0]), "the cut call's arguments are incomplete")
	})
}

func TestOpenAICompatibleLeniency(t *testing.T) {
	t.Parallel()
	s := setupProvider(t, "openai:gpt-4o", faultsOnFirstTries(llmtest.Fault{ArgsAsObject: true, NoUsage: true}), nil)
	resp, err := s.model.GenerateContent(context.Background(), userMsg("Task: T1"), llms.WithTools(testTools))
	require.NoError(t, err)
	c := resp.Choices[0]
	require.JSONEq(t, `{"path":"a.go","content":"package a\n"}`, c.ToolCalls[0].FunctionCall.Arguments, "object arguments are read")
	require.NoError(t, ValidateToolCall(c.ToolCalls[0]))
	u := UsageOf(resp, "openai:gpt-4o")
	require.True(t, u.Estimated, "missing usage is counted locally")
	require.Positive(t, u.InputTokens)
	require.Positive(t, u.OutputTokens)
	require.Positive(t, u.CostUSD)
}

func TestPromptCacheCounts(t *testing.T) {
	t.Parallel()
	s := setupProvider(t, "anthropic:claude-sonnet-4-5", nil, nil)
	msgs := []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, "You are a careful coder. "+string(make([]byte, 400))),
		llms.TextParts(llms.ChatMessageTypeHuman, "Task: T1"),
	}
	var usages []Usage
	for range 3 {
		resp, err := s.model.GenerateContent(context.Background(), msgs, llms.WithTools(testTools))
		require.NoError(t, err)
		usages = append(usages, UsageOf(resp, "anthropic:claude-sonnet-4-5"))
		msgs = append(msgs, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: []llms.ContentPart{resp.Choices[0].ToolCalls[0]}},
			llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: "call_1", Name: "write_to_file", Content: "ok"}}})
	}
	require.Zero(t, usages[0].CacheReadTokens)
	require.Positive(t, usages[0].CacheWriteTokens, "the first turn writes the prefix")
	require.Positive(t, usages[1].CacheReadTokens, "the next turn reads it")
	require.Greater(t, usages[2].CacheReadTokens, usages[1].CacheReadTokens, "the cached prefix grows with the conversation")
	var total Usage
	for _, u := range usages {
		total = total.Add(u)
	}
	su := s.srv.Usage()
	require.Equal(t, su.InputTokens, total.InputTokens)
	require.Equal(t, su.CacheReadTokens, total.CacheReadTokens)
	require.Equal(t, su.CacheWriteTokens, total.CacheWriteTokens)
	require.Equal(t, su.OutputTokens, total.OutputTokens)
}

func TestKeysOnlyWhereAllowed(t *testing.T) {
	t.Parallel()
	env := func(vals map[string]string) func(string) string { return func(k string) string { return vals[k] } }
	ctx := context.Background()

	// Plain http to another host is refused for every key.
	_, err := New(ctx, "anthropic:claude-sonnet-4-5", &Opts{GetenvFunc: env(map[string]string{
		"ANTHROPIC_API_KEY": testAnthropicKey, "ANTHROPIC_BASE_URL": "http://proxy.example.com"})})
	require.ErrorIs(t, err, ErrInsecureKey)
	_, err = New(ctx, "openai:gpt-4o", &Opts{GetenvFunc: env(map[string]string{
		"OPENAI_API_KEY": testOpenAIKey, "OPENAI_BASE_URL": "http://10.0.0.5:8000/v1"})})
	require.ErrorIs(t, err, ErrInsecureKey)
	_, err = New(ctx, "openai-compatible:llama@http://gpu-box:8000/v1", &Opts{APIKeyEnv: "VLLM_KEY",
		GetenvFunc: env(map[string]string{"VLLM_KEY": "vllm-secret-123"})})
	require.ErrorIs(t, err, ErrInsecureKey)

	// Loopback is fine, and the compatible server gets only llm.api_key_env's key.
	srv := llmtest.NewProvider(t, echo, nil)
	m, err := New(ctx, "openai-compatible:llama@"+srv.URL+"/v1", &Opts{APIKeyEnv: "VLLM_KEY",
		GetenvFunc: env(map[string]string{"VLLM_KEY": "vllm-secret-123", "OPENAI_API_KEY": testOpenAIKey})})
	require.NoError(t, err)
	_, err = m.GenerateContent(ctx, userMsg("Task: T1"))
	require.NoError(t, err)
	require.Equal(t, "Bearer vllm-secret-123", srv.Calls()[0].Header.Get("Authorization"))
	m, err = New(ctx, "openai-compatible:llama@"+srv.URL+"/v1", &Opts{GetenvFunc: env(map[string]string{"OPENAI_API_KEY": testOpenAIKey})})
	require.NoError(t, err)
	_, err = m.GenerateContent(ctx, userMsg("Task: T1"))
	require.NoError(t, err)
	require.Empty(t, srv.Calls()[1].Header.Get("Authorization"), "OPENAI_API_KEY is OpenAI's")

	// ANTHROPIC_BASE_URL is the API root.
	m, err = New(ctx, "anthropic:claude-sonnet-4-5", &Opts{GetenvFunc: env(map[string]string{
		"ANTHROPIC_API_KEY": testAnthropicKey, "ANTHROPIC_BASE_URL": srv.URL})})
	require.NoError(t, err)
	_, err = m.GenerateContent(ctx, userMsg("Task: T1"))
	require.NoError(t, err)
	require.Equal(t, llmtest.APIAnthropic, srv.Calls()[2].Turn.API)
	require.Equal(t, testAnthropicKey, srv.Calls()[2].Header.Get("X-Api-Key"))
}

func TestLimiterPausesEveryoneOnA429(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := NewLimiter(0, &LimiterOpts{NowFunc: clock.Now, SleepFunc: clock.Sleep})
	waited, _, err := l.Wait(context.Background())
	require.NoError(t, err)
	require.Zero(t, waited)
	l.Pause(10 * time.Second)
	waited, why, err := l.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, 10*time.Second, waited)
	require.Equal(t, KindRateLimit, why)
}

// A request held back by another's 429 waits without announcing it: the
// request that got the 429 announced the pause, and one 429 is one wait.
// Pacing, which nobody else announces, is.
func TestAnotherRequestsPauseIsAnnouncedOnce(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := NewLimiter(0, &LimiterOpts{NowFunc: clock.Now, SleepFunc: clock.Sleep})
	s := setupProvider(t, "anthropic:claude-sonnet-4-5", nil, &Opts{Limiter: l})
	l.Pause(5 * time.Second) // another worker's 429
	_, err := s.model.GenerateContent(context.Background(), userMsg("Task: T1"), llms.WithTools(testTools))
	require.NoError(t, err)
	require.Equal(t, []time.Duration{5 * time.Second}, clock.Waits(), "the request was held back")
	require.Empty(t, s.Waits(), "and did not announce the pause again")

	paced := NewLimiter(60, &LimiterOpts{NowFunc: clock.Now, SleepFunc: clock.Sleep})
	s = setupProvider(t, "anthropic:claude-sonnet-4-5", nil, &Opts{Limiter: paced})
	for range 2 {
		_, err = s.model.GenerateContent(context.Background(), userMsg("Task: T1"), llms.WithTools(testTools))
		require.NoError(t, err)
	}
	require.Len(t, s.Waits(), 1, "the second request's pacing is announced")
	require.Equal(t, "pacing", s.Waits()[0].Reason)
}

func TestLimiterPaces(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	l := NewLimiter(60, &LimiterOpts{NowFunc: clock.Now, SleepFunc: clock.Sleep})
	start := clock.Now()
	for range 10 {
		_, _, err := l.Wait(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, 9*time.Second, clock.Now().Sub(start), "60 a minute: one a second, the first at once")
}

func TestBackoffIsFullJitter(t *testing.T) {
	t.Parallel()
	b := Backoff{Base: time.Second, Max: 10 * time.Second, RandFunc: func() float64 { return 0.999 }}
	for retry, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		got := b.Delay(retry)
		require.InDelta(t, float64(want)*0.999, float64(got), float64(time.Millisecond), "retry %d", retry)
	}
	require.Zero(t, Backoff{Base: time.Second, Max: time.Minute, RandFunc: func() float64 { return 0 }}.Delay(3))
}

func TestRetryAfterHeaders(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		h      http.Header
		status int
		want   time.Duration
		ok     bool
	}{
		{"none", http.Header{}, 429, 0, false},
		{"seconds", http.Header{"Retry-After": {"7"}}, 429, 7 * time.Second, true},
		{"ms wins", http.Header{"Retry-After": {"7"}, "Retry-After-Ms": {"250"}}, 429, 250 * time.Millisecond, true},
		{"capped", http.Header{"Retry-After": {"86400"}}, 429, maxHonoured, true},
		{"anthropic reset on 429", http.Header{"Anthropic-Ratelimit-Requests-Reset": {"2025-01-01T00:00:30Z"}}, 429, 30 * time.Second, true},
		{"openai reset on 429", http.Header{"X-Ratelimit-Reset-Tokens": {"6m0s"}, "X-Ratelimit-Reset-Requests": {"2s"}}, 429, maxHonoured, true},
		{"reset ignored while some remain", http.Header{"X-Ratelimit-Remaining-Requests": {"5"}, "X-Ratelimit-Reset-Requests": {"2s"}}, 200, 0, false},
		{"reset honoured at zero remaining", http.Header{"X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"2s"}}, 200, 2 * time.Second, true},
	}
	for _, tt := range tests {
		got, ok := retryAfter(tt.h, tt.status, now)
		require.Equal(t, tt.ok, ok, tt.name)
		require.Equal(t, tt.want, got, tt.name)
	}
}

// Gateways report an upstream failure with status 200 and keep a slow
// reply alive with comment lines before its JSON; a retry-after of 0
// names no wait. Each failure is retried in place like its status would
// be, and one that asking again cannot mend is not.
func TestFailuresIn200Replies(t *testing.T) {
	t.Parallel()
	eachProvider(t, func(t *testing.T, spec string) {
		s := setupProvider(t, spec, faultsOnFirstTries(
			llmtest.Fault{Status: 200, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded (in a 200)"}}`},
			llmtest.Fault{Status: 200, Body: `{"error":{"code":502,"message":"upstream went away"}}`},
			llmtest.Fault{Status: 429, Header: retryAfterHeader("0")},
			llmtest.Fault{Keepalive: true},
		), nil)
		resp, err := s.model.GenerateContent(context.Background(), userMsg("Task: T1"), llms.WithTools(testTools))
		require.NoError(t, err)
		require.Len(t, resp.Choices[0].ToolCalls, 1, "the reply after the keep-alive lines is read")
		var reasons []string
		for _, w := range s.Waits() {
			reasons = append(reasons, w.Reason)
		}
		require.Equal(t, []string{KindOverloaded, KindServer, KindRateLimit}, reasons)
		require.Equal(t, 2*time.Second, s.clock.Waits()[2], "retry-after: 0 waits the backoff")

		refused := setupProvider(t, spec, faultsOnFirstTries(
			llmtest.Fault{Status: 200, Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		), nil)
		_, err = refused.model.GenerateContent(context.Background(), userMsg("Task: T1"))
		var perr *ProviderError
		require.ErrorAs(t, err, &perr)
		require.Equal(t, KindRequest, perr.Kind)
		require.Contains(t, err.Error(), "invalid x-api-key")
		require.Len(t, refused.srv.Calls(), 1)

		page := setupProvider(t, spec, faultsOnFirstTries(llmtest.Fault{Status: 200, Body: "<!doctype html><html>It works!</html>"}), nil)
		_, err = page.model.GenerateContent(context.Background(), userMsg("Task: T1"))
		require.ErrorContains(t, err, "the reply is a web page, not the API's JSON: check the provider's base URL")
		require.Len(t, page.srv.Calls(), 1)
	})
}
