package agent

import (
	"maps"
	"slices"
	"sync"

	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/llm"
)

// Usage counts model calls, tokens and cost. InputTokens excludes the
// tokens read from or written to the provider's prompt cache, which are
// counted apart.
type Usage struct {
	Calls            int     `json:"calls"`
	InputTokens      int     `json:"input_tokens"`
	OutputTokens     int     `json:"output_tokens"`
	CacheReadTokens  int     `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int     `json:"cache_write_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd"`
	// Estimated: a call's provider reported no usage, so its tokens were
	// counted locally.
	Estimated bool `json:"estimated,omitempty"`
	// Unreported: an agent CLI made model calls and reported no usage
	// for them, so they are in none of the counts.
	Unreported bool `json:"unreported,omitempty"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.Calls += o.Calls
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.CostUSD += o.CostUSD
	u.Estimated = u.Estimated || o.Estimated
	u.Unreported = u.Unreported || o.Unreported
}

// LLM returns u as llm.Usage (without the count of calls).
func (u Usage) LLM() llm.Usage {
	return llm.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, CostUSD: u.CostUSD, Estimated: u.Estimated, Unreported: u.Unreported}
}

// Sub returns u minus o: what was used since o was read. Estimated and
// Unreported stay u's.
func (u Usage) Sub(o Usage) Usage {
	return Usage{Calls: u.Calls - o.Calls, InputTokens: u.InputTokens - o.InputTokens, OutputTokens: u.OutputTokens - o.OutputTokens,
		CacheReadTokens: u.CacheReadTokens - o.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens - o.CacheWriteTokens,
		CostUSD: u.CostUSD - o.CostUSD, Estimated: u.Estimated, Unreported: u.Unreported}
}

// Tokens returns every token the calls processed: input, output and the
// cached input read or written. Budgets count these.
func (u Usage) Tokens() int {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// Pricing turns token counts into a cost. Prices are in US dollars per
// million tokens.
type Pricing = llm.Price

// usageFromResponse reads the usage a provider reported (llm.UsageOf). A
// response without any counts is estimated from the request and reply
// sizes, and marked so.
func usageFromResponse(resp *llms.ContentResponse, estIn, estOut int, price Pricing) Usage {
	lu := llm.UsageOf(resp, "")
	if lu == (llm.Usage{}) {
		lu = llm.Usage{InputTokens: estIn, OutputTokens: estOut, Estimated: true}
	}
	return Usage{Calls: 1, InputTokens: lu.InputTokens, OutputTokens: lu.OutputTokens,
		CacheReadTokens: lu.CacheReadTokens, CacheWriteTokens: lu.CacheWriteTokens,
		CostUSD: price.Cost(lu), Estimated: lu.Estimated}
}

// Accounting aggregates usage per conversation, per task and per run. It is
// safe for concurrent use by parallel workers.
type Accounting struct {
	mu    sync.Mutex
	convs map[string]Usage
	tasks map[string]Usage
	runs  map[string]Usage
}

// NewAccounting returns an empty Accounting.
func NewAccounting() *Accounting {
	return &Accounting{convs: map[string]Usage{}, tasks: map[string]Usage{}, runs: map[string]Usage{}}
}

// Add records u for a conversation of a task of a run. Empty IDs are not
// recorded at their level.
func (a *Accounting) Add(runID, taskID, conversationID string, u Usage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	add := func(m map[string]Usage, k string) {
		if k == "" {
			return
		}
		x := m[k]
		x.Add(u)
		m[k] = x
	}
	add(a.convs, conversationID)
	add(a.tasks, runID+"/"+taskID)
	add(a.runs, runID)
}

// Conversation returns the usage recorded for a conversation.
func (a *Accounting) Conversation(id string) Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.convs[id]
}

// Task returns the usage recorded for a task of a run, over all attempts.
func (a *Accounting) Task(runID, taskID string) Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tasks[runID+"/"+taskID]
}

// Run returns the usage recorded for a run.
func (a *Accounting) Run(runID string) Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs[runID]
}

// Conversations returns the IDs of the conversations recorded, sorted.
func (a *Accounting) Conversations() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.convs))
}
