package llm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := NewRedactor("supersecretvalue", "short", "", "supersecretvalue-longer")
	tests := []struct {
		in, want string
	}{
		{"nothing here", "nothing here"},
		{"key supersecretvalue leaked", "key [REDACTED] leaked"},
		{"supersecretvalue-longer first", "[REDACTED] first"},
		{"short values are not secrets", "short values are not secrets"},
		{"pattern sk-ant-api03-abcdefghijkl", "pattern [REDACTED]"},
		{"pattern sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX1234", "pattern [REDACTED]"},
		{"Authorization: Bearer abcdefghijklmnopqrstu", "Authorization: [REDACTED]"},
		{"sk-short stays", "sk-short stays"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, r.Redact(tt.in), "Redact(%q)", tt.in)
	}

	base := errors.New("call failed: supersecretvalue")
	err := r.RedactError(fmt.Errorf("wrap: %w", base))
	require.Equal(t, "wrap: call failed: [REDACTED]", err.Error())
	require.ErrorIs(t, err, base)
	plain := errors.New("plain")
	require.Same(t, plain, r.RedactError(plain))
	require.NoError(t, r.RedactError(nil))

	env := NewEnvRedactor(func(k string) string {
		if k == "OPENAI_API_KEY" {
			return "opensesame-1234"
		}
		return ""
	})
	require.Equal(t, "x [REDACTED] y", env.Redact("x opensesame-1234 y"))
}

func TestRedactReadsEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "env-key-value-123")
	require.Equal(t, "got [REDACTED]", Redact("got env-key-value-123"))
}

func TestUsageOf(t *testing.T) {
	t.Parallel()
	resp := func(infos ...map[string]any) *llms.ContentResponse {
		r := &llms.ContentResponse{}
		for _, info := range infos {
			r.Choices = append(r.Choices, &llms.ContentChoice{GenerationInfo: info})
		}
		return r
	}
	tests := []struct {
		name  string
		resp  *llms.ContentResponse
		model string
		want  Usage
	}{
		{"nil", nil, "gpt-4o", Usage{}},
		{"openai", resp(map[string]any{"PromptTokens": 1000, "CompletionTokens": 500, "TotalTokens": 1500}), "gpt-4o",
			Usage{InputTokens: 1000, OutputTokens: 500, CostUSD: (1000*2.5 + 500*10) / 1e6}},
		{"openai cached input", resp(map[string]any{"PromptTokens": 1000, "PromptCachedTokens": 800, "CompletionTokens": 10}), "openai:gpt-4o",
			Usage{InputTokens: 200, OutputTokens: 10, CacheReadTokens: 800, CostUSD: (200*2.5 + 10*10 + 800*1.25) / 1e6}},
		{"anthropic", resp(map[string]any{"InputTokens": 2000, "OutputTokens": 100}), "anthropic:claude-sonnet-4-5-20250929",
			Usage{InputTokens: 2000, OutputTokens: 100, CostUSD: (2000*3 + 100*15) / 1e6}},
		{"anthropic cache", resp(map[string]any{"InputTokens": 50, "OutputTokens": 100, "CacheReadInputTokens": 4000, "CacheCreationInputTokens": 1000}),
			"anthropic:claude-sonnet-4-5", Usage{InputTokens: 50, OutputTokens: 100, CacheReadTokens: 4000, CacheWriteTokens: 1000,
				CostUSD: (50*3 + 100*15 + 4000*0.3 + 1000*3.75) / 1e6}},
		{"estimated", resp(map[string]any{"PromptTokens": 10, "CompletionTokens": 3, InfoUsageEstimated: true}), "",
			Usage{InputTokens: 10, OutputTokens: 3, Estimated: true}},
		{"first choice with counts wins", resp(nil, map[string]any{"InputTokens": 5, "OutputTokens": 6}, map[string]any{"InputTokens": 7}), "",
			Usage{InputTokens: 5, OutputTokens: 6}},
		{"float counts", resp(map[string]any{"PromptTokens": 10.0, "CompletionTokens": int64(3)}), "unknown-model", Usage{InputTokens: 10, OutputTokens: 3}},
		{"longest prefix", resp(map[string]any{"PromptTokens": 1e6, "CompletionTokens": 0}), "gpt-4o-mini-2024", Usage{InputTokens: 1000000, CostUSD: 0.15}},
		{"compatible servers are not priced", resp(map[string]any{"PromptTokens": 1e6}), "openai-compatible:gpt-4o@http://localhost:8000/v1",
			Usage{InputTokens: 1000000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := UsageOf(tt.resp, tt.model)
			require.InDelta(t, tt.want.CostUSD, got.CostUSD, 1e-12)
			got.CostUSD = tt.want.CostUSD
			require.Equal(t, tt.want, got)
		})
	}
	require.Equal(t, Usage{InputTokens: 3, OutputTokens: 5, CacheReadTokens: 7, CacheWriteTokens: 1, CostUSD: 0.5, Estimated: true},
		Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 7, CostUSD: 0.25}.Add(Usage{InputTokens: 2, OutputTokens: 3, CacheWriteTokens: 1, CostUSD: 0.25, Estimated: true}))
	_, ok := PriceOf("llama3.1:8b")
	require.False(t, ok)
}

func TestUsageOfScripted(t *testing.T) {
	t.Parallel()
	m := setup(t)
	resp, err := m.GenerateContent(t.Context(), []llms.MessageContent{user("Task: T1\nAttempt: 1 of 3")})
	require.NoError(t, err)
	u := UsageOf(resp, "scripted:x.json")
	require.Positive(t, u.InputTokens)
	require.Positive(t, u.OutputTokens)
	require.Zero(t, u.CostUSD)
}
