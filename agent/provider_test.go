package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/llm/llmtest"
)

var providerSpecs = []string{"anthropic:claude-sonnet-4-5", "openai:gpt-4o"}

// providerModel builds a real provider model that talks to srv, with
// retries that do not wait.
func providerModel(t testing.TB, spec string, srv *llmtest.Provider, opts *llm.Opts) llms.Model {
	t.Helper()
	if opts == nil {
		opts = &llm.Opts{}
	}
	o := *opts
	o.BaseURL = srv.URL
	o.GetenvFunc = func(k string) string {
		return map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test-0123456789", "OPENAI_API_KEY": "sk-test-0123456789abcdefghij"}[k]
	}
	o.SleepFunc = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	m, err := llm.New(context.Background(), spec, &o)
	require.NoError(t, err)
	return m
}

// tenTurns is a scripted task of ten turns: nine files, then the
// completion.
func tenTurns(t testing.TB) *llm.Script {
	t.Helper()
	var replies []map[string]any
	for i := range 9 {
		replies = append(replies, map[string]any{"content": fmt.Sprintf("Writing part %d.", i),
			"tool_calls": []any{map[string]any{"name": "write_to_file", "arguments": map[string]any{
				"path": fmt.Sprintf("part%d.go", i), "content": fmt.Sprintf("package parts\n\n// Part%d is part %d.\nconst Part%d = %d\n", i, i, i, i)}}}})
	}
	replies = append(replies, map[string]any{"tool_calls": []any{map[string]any{"name": "attempt_completion", "arguments": map[string]any{"result": "nine parts"}}}})
	data, err := json.Marshal(map[string]any{"conversations": []any{map[string]any{"match": "^Task: T1", "replies": replies}}})
	require.NoError(t, err)
	s, err := llm.ParseScript(data)
	require.NoError(t, err)
	return s
}

func newProviderAgent(t testing.TB, m llms.Model) *agent.Agent {
	t.Helper()
	a, err := agent.New(m, agent.NewMemoryStore(), &agent.Opts{Skills: &agent.SkillsOpts{NoGlobal: true}, Model: "anthropic:claude-sonnet-4-5"})
	require.NoError(t, err)
	return a
}

func TestAgentThroughProviderFaults(t *testing.T) {
	t.Parallel()
	for _, spec := range providerSpecs {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			faults := func(turn llmtest.Turn, try int) llmtest.Fault {
				switch {
				case turn.Assistants == 0 && try == 0:
					return llmtest.Fault{Status: 429, Header: http.Header{"Retry-After": {"1"}}}
				case turn.Assistants == 0 && try == 1:
					return llmtest.Fault{Status: 529}
				case turn.Assistants == 2 && try == 0:
					return llmtest.Fault{Reset: true}
				case turn.Assistants == 3 && try == 0:
					// The reply is cut mid tool call: never run, the model goes on.
					return llmtest.Fault{Truncate: true}
				case turn.Assistants == 4:
					return llmtest.Fault{ArgsAsObject: true}
				}
				return llmtest.Fault{}
			}
			srv := llmtest.NewProvider(t, llmtest.ReplyFromModel(llm.NewScripted(tenTurns(t))), faults)
			a := newProviderAgent(t, providerModel(t, spec, srv, nil))
			wt := t.TempDir()
			res, err := a.Run(context.Background(), agent.Request{ID: "c1", Task: "Task: T1 — parts", Worktree: wt})
			require.NoError(t, err)
			require.Equal(t, agent.ReasonCompleted, res.Reason)
			for i := range 9 {
				_, err := os.Stat(filepath.Join(wt, fmt.Sprintf("part%d.go", i)))
				require.NoError(t, err)
			}
			calls := srv.Calls()
			require.Empty(t, llmtest.RetriedEqual(calls))
			su := srv.Usage()
			require.Equal(t, 11, su.Replies, "ten turns and the cut one")
			require.Equal(t, agent.Usage{Calls: 11, InputTokens: su.InputTokens, OutputTokens: su.OutputTokens,
				CacheReadTokens: su.CacheReadTokens, CacheWriteTokens: su.CacheWriteTokens, CostUSD: res.Usage.CostUSD}, res.Usage,
				"the agent counts what the provider reported")
			var cut bool
			for _, c := range calls {
				cut = cut || strings.Contains(string(c.Body), "cut off at the output token limit")
			}
			require.True(t, cut, "the model is told its reply was cut")
		})
	}
}

func TestAgentMarksFailedToolResults(t *testing.T) {
	t.Parallel()
	script := `{"conversations": [{"match": "^Task: T1", "replies": [
	  {"tool_calls": [{"name": "read_file", "arguments": {"path": "missing.go"}}]},
	  {"tool_calls": [{"name": "attempt_completion", "arguments": {"result": "done"}}]}]}]}`
	s, err := llm.ParseScript([]byte(script))
	require.NoError(t, err)
	srv := llmtest.NewProvider(t, llmtest.ReplyFromModel(llm.NewScripted(s)), nil)
	a := newProviderAgent(t, providerModel(t, providerSpecs[0], srv, nil))
	_, err = a.Run(context.Background(), agent.Request{ID: "c1", Task: "Task: T1 — read", Worktree: t.TempDir()})
	require.NoError(t, err)
	var body struct {
		Messages []struct {
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(srv.Calls()[1].Body, &body))
	result := body.Messages[2].Content[0]
	require.Equal(t, "tool_result", result["type"])
	require.Equal(t, true, result["is_error"])
	require.NotContains(t, result["content"], "\x00", "the mark does not reach the provider")
}

func TestAgentStopsForTheProviderAndResumes(t *testing.T) {
	t.Parallel()
	for _, spec := range providerSpecs {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			var down atomic.Bool
			down.Store(true)
			faults := func(turn llmtest.Turn, _ int) llmtest.Fault {
				if down.Load() && turn.Assistants == 1 {
					return llmtest.Fault{Status: 529}
				}
				return llmtest.Fault{}
			}
			srv := llmtest.NewProvider(t, llmtest.ReplyFromModel(llm.NewScripted(tenTurns(t))), faults)
			a := newProviderAgent(t, providerModel(t, spec, srv, &llm.Opts{MaxRetries: 2}))
			wt := t.TempDir()
			res, err := a.Run(context.Background(), agent.Request{ID: "c1", Task: "Task: T1 — parts", Worktree: wt})
			require.NoError(t, err)
			require.Equal(t, agent.ReasonProvider, res.Reason)
			require.Contains(t, res.Detail, "HTTP 529 (overloaded)")
			require.Contains(t, res.Detail, "gave up after 3 requests")
			require.Len(t, srv.Calls(), 4, "one reply, then three tries")

			down.Store(false)
			res, err = a.Resume(context.Background(), "c1", nil)
			require.NoError(t, err)
			require.Equal(t, agent.ReasonCompleted, res.Reason, "the conversation goes on where it stopped")
			require.Equal(t, 10, res.Usage.Calls)
		})
	}
}

// BenchmarkPromptCache runs the ten-turn task against the fake Anthropic
// server with and without prompt caching, and reports the input tokens of
// one attempt: plain input, cache reads and writes, and their cost in
// plain-input tokens at Anthropic's rates (reads 0.1×, writes 1.25×).
func BenchmarkPromptCache(b *testing.B) {
	for _, cache := range []bool{false, true} {
		b.Run(fmt.Sprintf("cache=%t", cache), func(b *testing.B) {
			var total llmtest.Usage
			for i := range b.N {
				srv := llmtest.NewProvider(b, llmtest.ReplyFromModel(llm.NewScripted(tenTurns(b))), nil)
				a := newProviderAgent(b, providerModel(b, providerSpecs[0], srv, &llm.Opts{NoPromptCache: !cache}))
				res, err := a.Run(context.Background(), agent.Request{ID: fmt.Sprintf("c%d", i), Task: "Task: T1 — parts", Worktree: b.TempDir()})
				require.NoError(b, err)
				require.Equal(b, agent.ReasonCompleted, res.Reason)
				u := srv.Usage()
				total.InputTokens += u.InputTokens
				total.CacheReadTokens += u.CacheReadTokens
				total.CacheWriteTokens += u.CacheWriteTokens
			}
			n := float64(b.N)
			b.ReportMetric(float64(total.InputTokens)/n, "input_tokens/attempt")
			b.ReportMetric(float64(total.CacheReadTokens)/n, "cache_read_tokens/attempt")
			b.ReportMetric(float64(total.CacheWriteTokens)/n, "cache_write_tokens/attempt")
			b.ReportMetric((float64(total.InputTokens)+0.1*float64(total.CacheReadTokens)+1.25*float64(total.CacheWriteTokens))/n, "billed_input_tokens/attempt")
		})
	}
}
