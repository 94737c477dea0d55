package llm

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/llm/llmtest"
)

func rewrite(t testing.TB, in string, anthropic bool) string {
	t.Helper()
	r := &sseRewriter{src: bufio.NewReader(strings.NewReader(in)), closer: io.NopCloser(nil), anthropic: anthropic, tools: map[int]*strings.Builder{}}
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(out)
}

func dataLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "data: ") {
			out = append(out, strings.TrimPrefix(l, "data: "))
		}
	}
	return out
}

func TestSSERewriterPassesShortStreamsThrough(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        string
		anthropic bool
	}{
		{"openai", llmtest.OpenAIStream(llmtest.OpenAIContentChunk("hi"), llmtest.OpenAIToolStartChunk(0, "c", "t", `{"a":1}`), llmtest.OpenAIFinishChunk("stop")).Body, false},
		{"anthropic text", llmtest.AnthropicStream(2, llmtest.AnthropicText("hello")).Body, true},
		{"crlf and comments", ": ping\r\ndata: {\"x\":1}\r\n\r\nid: 7\nretry: 10\n\n", false},
		{"no trailing newline", "data: [DONE]", false},
		{"not json", "data: hello\n\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.in, rewrite(t, tt.in, tt.anthropic))
		})
	}
}

func TestSSERewriterSplitsLongOpenAIChunks(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("ab€", 30<<10)                             // multi-byte runes straddle piece boundaries
	args := `{"content": "` + strings.Repeat("\u0001", 20<<10) + `"}` // escapes to 6 bytes each
	in := llmtest.OpenAIStream(
		llmtest.OpenAIContentChunk(text),
		llmtest.OpenAIToolStartChunk(0, "call_1", "write_to_file", args),
		llmtest.OpenAIFinishChunk("tool_calls"),
	).Body + ": " + strings.Repeat("c", 100<<10) + "\n"
	out := rewrite(t, in, false)
	lines := strings.Split(out, "\n")
	for _, l := range lines {
		require.Less(t, len(l), 64<<10, "every line fits langchaingo's scanner")
	}
	require.NotContains(t, out, "ccc", "the long comment line is dropped")

	var gotText, gotArgs strings.Builder
	var finish []any
	var headers int
	for _, d := range dataLines(out) {
		if d == "[DONE]" {
			continue
		}
		var chunk struct {
			ID      string `json:"id"`
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason any `json:"finish_reason"`
			} `json:"choices"`
		}
		require.NoError(t, json.Unmarshal([]byte(d), &chunk))
		require.Equal(t, "chatcmpl-test", chunk.ID)
		c := chunk.Choices[0]
		gotText.WriteString(c.Delta.Content)
		for _, tc := range c.Delta.ToolCalls {
			if tc.Type != "" {
				headers++
				require.Equal(t, "call_1", tc.ID)
				require.Equal(t, "write_to_file", tc.Function.Name)
			}
			gotArgs.WriteString(tc.Function.Arguments)
		}
		if c.FinishReason != nil {
			finish = append(finish, c.FinishReason)
		}
	}
	require.Equal(t, text, gotText.String())
	require.Equal(t, args, gotArgs.String())
	require.Equal(t, 1, headers, "continuations carry no type, as OpenAI sends them")
	require.Equal(t, []any{"tool_calls"}, finish)
}

func TestSSERewriterAnthropicToolBlocks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"valid input is kept", `{"path": "a.go"}`, `{"path": "a.go"}`},
		{"malformed input is wrapped", `{"path": "a.go", `, `{"` + malformedKey + `":"{\"path\": \"a.go\", "}`},
		{"non-object input is wrapped", `[1, 2]`, `{"` + malformedKey + `":"[1, 2]"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := rewrite(t, llmtest.AnthropicStream(3, llmtest.AnthropicText("hi"), llmtest.AnthropicToolUse("toolu_1", "t", tt.input)).Body, true)
			var partial strings.Builder
			var events []string
			for _, block := range strings.Split(out, "\n\n") {
				if strings.TrimSpace(block) == "" {
					continue
				}
				lines := strings.Split(block, "\n")
				require.Len(t, lines, 2, "each event keeps its event line: %q", block)
				events = append(events, strings.TrimPrefix(lines[0], "event: "))
				var ev struct {
					Type  string
					Delta struct {
						Type        string
						PartialJSON string `json:"partial_json"`
					}
				}
				require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &ev))
				require.Equal(t, ev.Type, events[len(events)-1])
				if ev.Delta.Type == "input_json_delta" {
					partial.WriteString(ev.Delta.PartialJSON)
				}
			}
			require.Equal(t, tt.want, partial.String())
			require.Equal(t, "message_stop", events[len(events)-1])
		})
	}
}

func TestFixAnthropicMessage(t *testing.T) {
	t.Parallel()
	valid := llmtest.AnthropicMessage(llmtest.AnthropicText("a"), llmtest.AnthropicToolUse("t1", "x", `{"a": 1}`)).Body
	require.Equal(t, valid, string(fixAnthropicMessage([]byte(valid))), "nothing to fix: body unchanged")
	require.Equal(t, "not json", string(fixAnthropicMessage([]byte("not json"))))

	tests := []struct {
		input string
		want  string
	}{
		{`"{\"a\": "`, `{"a": `},
		{`42`, `42`},
		{`["x"]`, `["x"]`},
	}
	for _, tt := range tests {
		body := `{"type":"message","content":[{"type":"tool_use","id":"t1","name":"x","input":` + tt.input + `}],"usage":{"input_tokens":1,"output_tokens":2}}`
		var msg struct {
			Content []struct {
				Input map[string]string `json:"input"`
			} `json:"content"`
			Usage map[string]int `json:"usage"`
		}
		require.NoError(t, json.Unmarshal(fixAnthropicMessage([]byte(body)), &msg), "input %s", tt.input)
		require.Equal(t, map[string]string{malformedKey: tt.want}, msg.Content[0].Input)
		require.Equal(t, 2, msg.Usage["output_tokens"])
	}
}

func TestSplitText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 3, []string{""}},
		{"abc", 3, []string{"abc"}},
		{"abcdefg", 3, []string{"abc", "def", "g"}},
		{"aé€b", 3, []string{"aé", "€", "b"}},
		{"€€", 2, []string{"\xe2\x82", "\xac", "\xe2\x82", "\xac"}}, // n smaller than a rune: cut inside it
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, splitText(tt.s, tt.n), "splitText(%q, %d)", tt.s, tt.n)
	}
}

func TestTransportPassesNonStreamedOpenAIThrough(t *testing.T) {
	t.Parallel()
	body := llmtest.OpenAIChat("hi").Body
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	resp, err := (&http.Client{Transport: NewTransport(nil, ProviderOpenAI)}).Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, body, string(got))
}

func BenchmarkSSERewriter(b *testing.B) {
	in := llmtest.OpenAIStream(
		llmtest.OpenAIContentChunk(strings.Repeat("word ", 20<<10)),
		llmtest.OpenAIContentChunk("short"),
		llmtest.OpenAIFinishChunk("stop"),
	).Body
	b.SetBytes(int64(len(in)))
	var events int
	for b.Loop() {
		events = len(dataLines(rewrite(b, in, false)))
	}
	b.ReportMetric(float64(events), "events/op")
}
