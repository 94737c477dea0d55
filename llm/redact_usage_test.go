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
			Usage{1000, 500, (1000*2.5 + 500*10) / 1e6}},
		{"anthropic", resp(map[string]any{"InputTokens": 2000, "OutputTokens": 100}), "anthropic:claude-sonnet-4-5-20250929",
			Usage{2000, 100, (2000*3 + 100*15) / 1e6}},
		{"first choice with counts wins", resp(nil, map[string]any{"InputTokens": 5, "OutputTokens": 6}, map[string]any{"InputTokens": 7}), "",
			Usage{5, 6, 0}},
		{"float counts", resp(map[string]any{"PromptTokens": 10.0, "CompletionTokens": int64(3)}), "unknown-model", Usage{10, 3, 0}},
		{"longest prefix", resp(map[string]any{"PromptTokens": 1e6, "CompletionTokens": 0}), "gpt-4o-mini-2024", Usage{1000000, 0, 0.15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := UsageOf(tt.resp, tt.model)
			require.Equal(t, tt.want.InputTokens, got.InputTokens)
			require.Equal(t, tt.want.OutputTokens, got.OutputTokens)
			require.InDelta(t, tt.want.CostUSD, got.CostUSD, 1e-12)
		})
	}
	require.Equal(t, Usage{3, 5, 0.5}, Usage{1, 2, 0.25}.Add(Usage{2, 3, 0.25}))
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
