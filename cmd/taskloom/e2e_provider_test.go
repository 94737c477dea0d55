package main

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/report"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/llm/llmtest"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/store/storetest"
)

const (
	e2eAnthropicKey = "sk-ant-e2e-0123456789abcdef"
	e2eOpenAIKey    = "sk-e2e-0123456789abcdefghijklmn"
)

// providerRun is a textkit repo whose model is a real provider client
// talking to a fake server that replays the textkit session.
type providerRun struct {
	// db is the PostgreSQL store's URL, or "" for SQLite.
	db   string
	dir  string
	spec string
	key  string
	srv  *llmtest.Provider
}

// passingT2 makes T2's first try the one that passes (its second try's
// count.go), and opens T1 by reading a file that is not there, so that a
// failed tool result goes to the provider.
func passingT2(s *llm.Script) {
	var fixed string
	for _, c := range s.Conversations {
		if strings.HasPrefix(c.Match, `Task: T2 `) && strings.Contains(c.Match, "Attempt: 2") {
			for _, r := range c.Replies {
				for _, tc := range r.ToolCalls {
					if tc.Name == "write_to_file" && strings.Contains(string(tc.Arguments), `"textkit/count.go"`) {
						fixed = string(tc.Arguments)
					}
				}
			}
		}
	}
	for i, c := range s.Conversations {
		switch {
		case strings.HasPrefix(c.Match, `Task: T2 `) && strings.Contains(c.Match, "Attempt: 1"):
			c.Replies[0].ToolCalls[0].Arguments = json.RawMessage(fixed)
		case strings.HasPrefix(c.Match, `Task: T1 `):
			read := llm.Reply{ToolCalls: []llm.ScriptedToolCall{{Name: "read_file", Arguments: json.RawMessage(`{"path": "textkit/missing.go"}`)}}}
			s.Conversations[i].Replies = append([]llm.Reply{read}, c.Replies...)
		}
	}
}

// newProviderRun sets up the repo and the fake server, and points the
// provider's base URL and key variables at them.
func newProviderRun(t *testing.T, kind, spec string, faults llmtest.FaultFunc, config func(map[string]any)) *providerRun {
	t.Helper()
	r := &providerRun{spec: spec}
	if kind == "postgres" {
		r.db = storetest.NewPostgresSchema(t)
	}
	r.dir = exampleRepo(t, func(c map[string]any) {
		c["parallel_workers"] = 3
		c["model"] = spec
		c["llm"] = map[string]any{"request_timeout": "1s"}
		if r.db != "" {
			// Every command of the run reads its store from the config.
			c["database"] = map[string]any{"url": r.db}
		}
		if config != nil {
			config(c)
		}
	}, passingT2)
	data, err := os.ReadFile(filepath.Join(r.dir, ".taskloom", "demo-session.json"))
	require.NoError(t, err)
	script, err := llm.ParseScript(data)
	require.NoError(t, err)
	r.srv = llmtest.NewProvider(t, llmtest.ReplyFromModel(llm.NewScripted(script)), faults)
	if strings.HasPrefix(spec, "anthropic:") {
		r.key = e2eAnthropicKey
		t.Setenv("ANTHROPIC_API_KEY", r.key)
		t.Setenv("ANTHROPIC_BASE_URL", r.srv.URL)
		t.Setenv("OPENAI_API_KEY", "")
	} else {
		r.key = e2eOpenAIKey
		t.Setenv("OPENAI_API_KEY", r.key)
		t.Setenv("OPENAI_BASE_URL", r.srv.URL+"/v1")
		t.Setenv("ANTHROPIC_API_KEY", "")
	}
	return r
}

func (r *providerRun) status(t *testing.T, id string) report.Status {
	t.Helper()
	code, stdout, stderr := taskloom(t, "status", id, "--repo", r.dir, "--json")
	require.Equal(t, 0, code, "status\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	var rep report.Status
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	return rep
}

// keysWhereAllowed checks that each request carried the key in the
// provider's own header and no other, and that the key is in neither the
// output nor the store.
func (r *providerRun) keysWhereAllowed(t *testing.T, outputs ...string) {
	t.Helper()
	for _, c := range r.srv.Calls() {
		if r.srv.Calls()[0].Turn.API == llmtest.APIAnthropic {
			require.Equal(t, r.key, c.Header.Get("X-Api-Key"))
			require.Empty(t, c.Header.Get("Authorization"))
		} else {
			require.Equal(t, "Bearer "+r.key, c.Header.Get("Authorization"))
			require.Empty(t, c.Header.Get("X-Api-Key"))
		}
		require.NotContains(t, string(c.Body), r.key, "the key is never in a request body")
	}
	for _, out := range outputs {
		require.NotContains(t, out, r.key)
	}
	if r.db != "" {
		require.NotContains(t, dumpStore(t, "postgres", r.dir, []string{r.db}), r.key, "the key is never stored")
		return
	}
	files, _ := filepath.Glob(filepath.Join(r.dir, ".taskloom", "taskloom.db*"))
	require.NotEmpty(t, files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NotContains(t, string(data), r.key, "the key is never stored (%s)", f)
	}
}

// TestE2EProvidersUnderFaults runs the textkit pipeline with 3 workers on
// each real provider client against a fake server that fails the way real
// ones do: a 429 burst with retry-after, 529s, 500s, resets, a stall past
// the request timeout, a reply cut at max_tokens in a tool call, and (for
// OpenAI) arguments as an object. Every task is integrated on its first
// attempt, every failed request is retried byte for byte, and status
// reports the usage the server reported.
func TestE2EProvidersUnderFaults(t *testing.T) {
	skipShort(t)
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, spec := range []string{"anthropic:claude-sonnet-4-5", "openai:gpt-4o"} {
			t.Run(kind+"/"+spec, func(t *testing.T) {
				var requests atomic.Int64
				faults := func(turn llmtest.Turn, try int) llmtest.Fault {
					n := requests.Add(1)
					fast := http.Header{"Retry-After-Ms": {"20"}}
					switch {
					case try == 0 && strings.HasPrefix(turn.FirstUser, "Task: T1 ") && turn.Assistants == 2:
						return llmtest.Fault{Stall: 5 * time.Second}
					case try == 0 && strings.HasPrefix(turn.FirstUser, "Task: T3-a ") && turn.Assistants == 0:
						return llmtest.Fault{Truncate: true}
					case strings.HasPrefix(turn.FirstUser, "Task: T4 ") && turn.Assistants == 0:
						return llmtest.Fault{ArgsAsObject: true}
					case n >= 4 && n <= 9:
						// A burst while the workers run: each waits out
						// retry-after, and the limiter holds back the others.
						return llmtest.Fault{Status: 429, Header: http.Header{"Retry-After": {"1"}}}
					case try > 0:
						return llmtest.Fault{}
					}
					h := fnv.New32a()
					h.Write([]byte(turn.Key))
					switch h.Sum32() % 4 {
					case 0:
						return llmtest.Fault{Status: 529, Header: fast}
					case 1:
						return llmtest.Fault{Status: 500, Header: fast}
					case 2:
						return llmtest.Fault{Reset: true}
					}
					return llmtest.Fault{}
				}
				r := newProviderRun(t, kind, spec, faults, nil)
				code, stdout, stderr := taskloom(t, "run", filepath.Join(r.dir, "PRODUCT.md"), "--repo", r.dir)
				require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
				id := runID(t, stdout)
				goTestPasses(t, r.dir)

				tr := trailers(t, r.dir)
				require.Equal(t, []string{"T1", "T2", "T3-a", "T3-b", "T4"}, sortedKeys(tr))
				for task, seqs := range tr {
					require.Equal(t, []string{"1"}, seqs, "task %s is integrated with attempt 1: faults cost no attempt", task)
				}
				calls := r.srv.Calls()
				require.Empty(t, llmtest.RetriedEqual(calls))
				var faulted, cut, objectArgs, isError bool
				for _, c := range calls {
					faulted = faulted || c.Fault.Failed()
					cut = cut || c.Fault.Truncate
					objectArgs = objectArgs || c.Fault.ArgsAsObject
					isError = isError || strings.Contains(string(c.Body), `"is_error":true`)
				}
				require.True(t, faulted, "faults were injected")
				require.True(t, cut, "a reply was cut at max_tokens")
				require.True(t, objectArgs, "arguments came as an object")
				if strings.HasPrefix(spec, "anthropic:") {
					require.True(t, isError, "the failed read_file went back with is_error")
				}
				require.Contains(t, stdout, "provider "+strings.Split(spec, ":")[0]+": rate_limit, HTTP 429; waiting")

				rep := r.status(t, id)
				su := r.srv.Usage()
				require.Equal(t, su.InputTokens, rep.Usage.InputTokens)
				require.Equal(t, su.OutputTokens, rep.Usage.OutputTokens)
				require.Equal(t, su.CacheReadTokens, rep.Usage.CacheReadTokens)
				require.Equal(t, su.CacheWriteTokens, rep.Usage.CacheWriteTokens)
				require.False(t, rep.Usage.Estimated)
				require.NotNil(t, rep.Usage.CostUSD)
				require.Positive(t, *rep.Usage.CostUSD)
				if strings.HasPrefix(spec, "anthropic:") {
					require.Positive(t, su.CacheReadTokens, "the prompt cache is used")
				}
				require.Contains(t, stdout, "usage: ")
				r.keysWhereAllowed(t, stdout, stderr)
			})
		}
	}
}

// TestE2EProviderDownPausesForReview: a provider that keeps failing past
// llm.max_retries pauses the task for review (exit 3, reason provider)
// without counting an attempt; once it is back, resume completes the run.
func TestE2EProviderDownPausesForReview(t *testing.T) {
	skipShort(t)
	for _, kind := range []string{"sqlite", "postgres"} {
		for _, spec := range []string{"anthropic:claude-sonnet-4-5", "openai:gpt-4o"} {
			t.Run(kind+"/"+spec, func(t *testing.T) {
				var down atomic.Bool
				down.Store(true)
				faults := func(turn llmtest.Turn, _ int) llmtest.Fault {
					// T2's second turn: its conversation has begun.
					if down.Load() && strings.HasPrefix(turn.FirstUser, "Task: T2 ") && turn.Assistants > 0 {
						return llmtest.Fault{Status: 529, Header: http.Header{"Retry-After-Ms": {"10"}}, Message: "Overloaded"}
					}
					return llmtest.Fault{}
				}
				r := newProviderRun(t, kind, spec, faults, func(c map[string]any) {
					c["llm"] = map[string]any{"request_timeout": "1s", "max_retries": 2}
				})
				code, stdout, stderr := taskloom(t, "run", filepath.Join(r.dir, "PRODUCT.md"), "--repo", r.dir, "--json")
				require.Equal(t, 3, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
				var id string
				var waits int
				for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
					var ev map[string]any
					require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
					if ev["type"] == "run_started" {
						id, _ = ev["run_id"].(string)
					}
					if ev["type"] == "provider_wait" {
						waits++
						require.Equal(t, llm.KindOverloaded, ev["reason"])
						require.Contains(t, ev, "seconds")
					}
				}
				require.Equal(t, 2, waits, "one provider_wait per retry\n%s", stdout)
				rep := r.status(t, id)
				require.Len(t, rep.Escalations, 1)
				require.Equal(t, "T2", rep.Escalations[0].TaskID)
				require.Equal(t, nodes.ReasonProvider, rep.Escalations[0].Reason)
				require.Contains(t, rep.Escalations[0].Error, "HTTP 529 (overloaded): Overloaded; gave up after 3 requests")

				s := openTestSession(t, r.dir, r.db)
				g, err := s.Graph()
				require.NoError(t, err)
				res, err := g.State(t.Context(), id, -1)
				require.NoError(t, err)
				t2, _ := res.State.Tasks.Get("T2")
				require.Zero(t, t2.Attempts, "a provider failure is not an attempt")

				down.Store(false)
				before := len(r.srv.Calls())
				code, stdout, stderr = taskloom(t, "review", id, "--repo", r.dir, "--task", "T2", "--action", "retry", "--note", "NOTE-42: the provider is back")
				require.Equal(t, 0, code, "review\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
				code, stdout, stderr = taskloom(t, "resume", id, "--repo", r.dir)
				require.Equal(t, 0, code, "resume\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
				goTestPasses(t, r.dir)
				r.keysWhereAllowed(t, stdout, stderr)
				// The attempt the provider stopped went on, in its own
				// conversation: no second attempt.
				require.Contains(t, stdout, "started T2 (attempt 1 of")
				res, err = g.State(t.Context(), id, -1)
				require.NoError(t, err)
				require.NotContains(t, res.State.Attempts.Keys(), "T2/2")
				t2a, _ := res.State.Attempts.Get("T2/1")
				require.NotEmpty(t, t2a.Integrated)
				for _, c := range r.srv.Calls()[before:] {
					if strings.HasPrefix(c.Turn.FirstUser, "Task: T2 ") {
						require.Positive(t, c.Turn.Assistants, "T2's conversation went on where it stopped")
						require.Contains(t, string(c.Body), "NOTE-42: the provider is back", "the review's note reaches the conversation")
						break
					}
				}
			})
		}
	}
}

// A provider that refuses the key stops the run at once, with one line
// saying what to fix, rather than pause every task for review one by one;
// once the key is fixed, resume goes on with the same attempt.
func TestE2EProviderRefusingTheKeyStopsTheRun(t *testing.T) {
	skipShort(t)
	var refused atomic.Bool
	refused.Store(true)
	faults := func(turn llmtest.Turn, _ int) llmtest.Fault {
		if refused.Load() && strings.HasPrefix(turn.FirstUser, "Task: T2 ") {
			return llmtest.Fault{Status: 401, Message: "invalid x-api-key"}
		}
		return llmtest.Fault{}
	}
	r := newProviderRun(t, "sqlite", "anthropic:claude-sonnet-4-5", faults, nil)
	code, stdout, stderr := taskloom(t, "run", filepath.Join(r.dir, "PRODUCT.md"), "--repo", r.dir)
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	require.Contains(t, stderr, "the model provider refused the API key")
	require.Contains(t, stderr, "invalid x-api-key")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line:\n%s", stderr)
	id := runID(t, stdout)
	require.Contains(t, stdout, "taskloom resume "+id)

	refused.Store(false)
	code, stdout, stderr = taskloom(t, "resume", id, "--repo", r.dir)
	require.Equal(t, 0, code, "resume\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	goTestPasses(t, r.dir)
	s := openTestSession(t, r.dir, r.db)
	g, err := s.Graph()
	require.NoError(t, err)
	res, err := g.State(t.Context(), id, -1)
	require.NoError(t, err)
	for _, k := range res.State.Attempts.Keys() {
		require.NotEqual(t, "T2/2", k, "the refused attempt went on; no second one")
	}
	r.keysWhereAllowed(t, stdout, stderr)
}
