package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/llm"
	"github.com/tmc/langchaingo/llms"
)

// recorder wraps a model, keeps every request and can cancel a context on
// a given call, to simulate a process being killed mid-conversation.
type recorder struct {
	inner llms.Model

	mu       sync.Mutex
	reqs     [][]llms.MessageContent
	cancelAt int // 1-based call number; 0 never
	cancel   context.CancelFunc
}

func (r *recorder) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, r, prompt, options...)
}

func (r *recorder) GenerateContent(ctx context.Context, msgs []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, msgs)
	n := len(r.reqs)
	r.mu.Unlock()
	if r.cancelAt > 0 && n == r.cancelAt {
		r.cancel()
		return nil, ctx.Err()
	}
	return r.inner.GenerateContent(ctx, msgs, options...)
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

func (r *recorder) last() []llms.MessageContent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

func scripted(t *testing.T, script string) *recorder {
	t.Helper()
	s, err := llm.ParseScript([]byte(script))
	require.NoError(t, err)
	return &recorder{inner: llm.NewScripted(s)}
}

// clock returns a NowFunc that advances one second per reading.
func clock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
}

type env struct {
	agent *agent.Agent
	model *recorder
	store agent.HistoryStore
	wt    string
}

// setup builds an agent on a scripted model and a temporary worktree.
// opts may be nil; global skills are always off.
func setup(t *testing.T, script string, opts *agent.Opts) *env {
	t.Helper()
	if opts == nil {
		opts = &agent.Opts{}
	}
	if opts.Skills == nil {
		opts.Skills = &agent.SkillsOpts{NoGlobal: true}
	}
	if opts.NowFunc == nil {
		opts.NowFunc = clock()
	}
	m := scripted(t, script)
	store := agent.NewMemoryStore()
	a, err := agent.New(m, store, opts)
	require.NoError(t, err)
	return &env{agent: a, model: m, store: store, wt: t.TempDir()}
}

func (e *env) run(t *testing.T, id, task, mode string) *agent.Result {
	t.Helper()
	res, err := e.agent.Run(context.Background(), agent.Request{ID: id, Task: task, Worktree: e.wt, Mode: mode})
	require.NoError(t, err)
	require.NotNil(t, res)
	return res
}

func (e *env) load(t *testing.T, id string) *agent.Record {
	t.Helper()
	rec, err := e.store.Load(context.Background(), id)
	require.NoError(t, err)
	return rec
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// toolResults returns the tool_result blocks of a history, by tool_use ID.
func toolResults(rec *agent.Record) map[string]agent.Block {
	out := map[string]agent.Block{}
	for _, m := range rec.API {
		for _, b := range m.Content {
			if b.Type == agent.BlockToolResult {
				out[b.ToolUseID] = b
			}
		}
	}
	return out
}

// toolUses returns the tool_use blocks of a history, in order.
func toolUses(rec *agent.Record) []agent.Block {
	var out []agent.Block
	for _, m := range rec.API {
		for _, b := range m.Content {
			if b.Type == agent.BlockToolUse {
				out = append(out, b)
			}
		}
	}
	return out
}

// resultFor returns the tool_result of the i-th tool_use.
func resultFor(t *testing.T, rec *agent.Record, i int) agent.Block {
	t.Helper()
	uses := toolUses(rec)
	require.Greater(t, len(uses), i, "tool uses: %d", len(uses))
	r, ok := toolResults(rec)[uses[i].ID]
	require.True(t, ok, "tool_use %d (%s) has no tool_result", i, uses[i].Name)
	return r
}

// requirePaired checks that every tool_use has a tool_result and every
// tool_result a tool_use, in the history and in a model request.
func requirePaired(t *testing.T, rec *agent.Record) {
	t.Helper()
	results := toolResults(rec)
	uses := map[string]bool{}
	for _, u := range toolUses(rec) {
		uses[u.ID] = true
		_, ok := results[u.ID]
		require.True(t, ok, "tool_use %s (%s) has no tool_result", u.ID, u.Name)
	}
	for id := range results {
		require.True(t, uses[id], "tool_result %s has no tool_use", id)
	}
}

func firstUserText(msgs []llms.MessageContent) string {
	for _, m := range msgs {
		if m.Role != llms.ChatMessageTypeHuman {
			continue
		}
		var parts []string
		for _, p := range m.Parts {
			if tc, ok := p.(llms.TextContent); ok {
				parts = append(parts, tc.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

func systemText(msgs []llms.MessageContent) string {
	for _, m := range msgs {
		if m.Role == llms.ChatMessageTypeSystem {
			return m.Parts[0].(llms.TextContent).Text
		}
	}
	return ""
}

func uiKinds(rec *agent.Record) []string {
	var out []string
	for _, u := range rec.UI {
		k := u.Say
		if u.Type == agent.UIAsk {
			k = "ask:" + u.Ask
		}
		out = append(out, k)
	}
	return out
}
