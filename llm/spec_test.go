package llm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

func TestParseSpec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec    string
		want    Spec
		wantErr string
	}{
		{spec: "anthropic:claude-sonnet-4-5", want: Spec{Provider: "anthropic", Model: "claude-sonnet-4-5"}},
		{spec: "openai:gpt-4o", want: Spec{Provider: "openai", Model: "gpt-4o"}},
		{spec: "openai-compatible:llama3.1:8b@http://localhost:11434/v1", want: Spec{Provider: "openai-compatible", Model: "llama3.1:8b", BaseURL: "http://localhost:11434/v1"}},
		{spec: "openai-compatible:org/m@v2@https://h.example/v1", want: Spec{Provider: "openai-compatible", Model: "org/m@v2", BaseURL: "https://h.example/v1"}},
		{spec: "scripted:testdata/session.json", want: Spec{Provider: "scripted", Path: "testdata/session.json"}},
		{spec: "scripted:C:/x.json", want: Spec{Provider: "scripted", Path: "C:/x.json"}},
		{spec: "gpt-4o", wantErr: `missing "PROVIDER:" prefix`},
		{spec: ":gpt-4o", wantErr: "missing provider"},
		{spec: "anthropic:", wantErr: "missing model name"},
		{spec: "scripted:", wantErr: "missing script path"},
		{spec: "openai-compatible:llama3", wantErr: `missing "@BASE_URL"`},
		{spec: "openai-compatible:@http://x/v1", wantErr: "missing model name"},
		{spec: "openai-compatible:m@http://", wantErr: "not an absolute http(s) URL"},
		{spec: "gemini:pro", wantErr: `unknown provider "gemini"`},
		{spec: "ollama:llama3", wantErr: "openai-compatible:MODEL@http://localhost:11434/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSpec(tt.spec)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrBadSpec)
				require.ErrorContains(t, err, tt.wantErr)
				require.ErrorContains(t, err, `"`+tt.spec+`"`)
				require.ErrorContains(t, err, "accepted forms")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.spec, got.String())
		})
	}
}

func TestNewScripted(t *testing.T) {
	t.Parallel()
	m, err := New(context.Background(), "scripted:testdata/session.json", nil)
	require.NoError(t, err)
	resp, err := m.GenerateContent(context.Background(), []llms.MessageContent{user("Task: T1 — x\nAttempt: 1 of 3")})
	require.NoError(t, err)
	require.Equal(t, "I'll write the file.", resp.Choices[0].Content)

	_, err = New(context.Background(), "scripted:testdata/nope.json", nil)
	require.ErrorContains(t, err, "nope.json")
	_, err = New(context.Background(), "ollama:llama3", nil)
	require.ErrorContains(t, err, "openai-compatible:MODEL@http://localhost:11434/v1")
}
