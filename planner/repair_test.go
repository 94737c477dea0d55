package planner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestExtractJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"plain", `{"a": 1}`, `{"a": 1}`},
		{"fenced", "Here:\n```json\n{\"a\": 1}\n```\nDone.", `{"a": 1}`},
		{"fence without language", "```\n{\"a\": 1}\n```", `{"a": 1}`},
		{"unclosed fence", "```json\n{\"a\": [1,", `{"a": [1,`},
		{"prose before", "Sure! {\"a\": 1}", `{"a": 1}`},
		{"prose after", "{\"a\": 1}\nHope this helps {x}", `{"a": 1}`},
		{"no JSON", "I cannot do that.", "I cannot do that."},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ExtractJSON(tt.in), tt.name)
	}
}

func TestRepair(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    string // "" means not repairable
		changes []string
	}{
		{"valid JSON needs nothing", `{"a": [1]}`, "", nil},
		{"trailing commas", `{"a": [1, 2,], "b": {"c": 1,},}`, `{"a": [1, 2], "b": {"c": 1}}`, []string{"removed trailing commas"}},
		{"trailing comma before a comment", "{\"a\": [1, // last\n]}", "{\"a\": [1 \n]}", []string{"removed trailing commas", "removed comments"}},
		{"comments", "{\n// the plan\n\"a\": 1 /* one */}", "{\n\n\"a\": 1 }", []string{"removed comments"}},
		{"raw newline in a string", "{\"a\": \"line 1\nline 2\ttab\"}", `{"a": "line 1\nline 2\ttab"}`, []string{"escaped raw control characters in strings"}},
		{"missing closers after a complete object", `{"tasks": [{"id": "T1"}, {"id": "T2"}`, `{"tasks": [{"id": "T1"}, {"id": "T2"}]}`, []string{"closed unbalanced brackets at the end"}},
		{"missing closer after a complete array", `{"tasks": [{"id": "T1", "deps": ["a"]`, `{"tasks": [{"id": "T1", "deps": ["a"]}]}`, []string{"closed unbalanced brackets at the end"}},
		{"a slash in a string is kept", `{"a": "x//y", "b": [1,]}`, `{"a": "x//y", "b": [1]}`, []string{"removed trailing commas"}},
		{"escaped quote", `{"a": "say \"hi\"",}`, `{"a": "say \"hi\""}`, []string{"removed trailing commas"}},
		{"cut inside a string", `{"tasks": [{"id": "T1", "title": "Fo`, "", nil},
		{"cut after a key", `{"tasks": [{"id": "T1", "title"`, "", nil},
		{"cut after a comma", `{"tasks": [{"id": "T1"},`, "", nil},
		{"cut after a number", `{"tasks": [{"id": "T1", "n": 4`, "", nil},
		{"cut after a string value", `{"tasks": [{"id": "T1"`, "", nil},
		{"cut in an escape", `{"a": "x\`, "", nil},
		{"mismatched bracket", `{"a": [1}`, "", nil},
		{"stray closer", `{"a": 1}}`, "", nil},
		{"unclosed block comment", `{"a": 1 /* x`, "", nil},
		{"missing comma is not guessed", `{"a": 1 "b": 2,}`, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, changes, ok := Repair(tt.in)
			if tt.want == "" {
				require.False(t, ok, "repaired to %q", got)
				return
			}
			require.True(t, ok)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.changes, changes)
		})
	}
}

func TestRepairNoClosingWhenTruncated(t *testing.T) {
	t.Parallel()
	_, _, ok := repair(`{"tasks": [{"id": "T1"}`, false)
	require.False(t, ok, "a reply cut at the token limit is not closed")
	got, _, ok := repair(`{"tasks": [1,]}`, false)
	require.True(t, ok)
	require.Equal(t, `{"tasks": [1]}`, got)
}
