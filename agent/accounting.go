package agent

import (
	"sort"
	"sync"

	"github.com/tmc/langchaingo/llms"
)

// Usage counts model calls, tokens and cost.
type Usage struct {
	Calls        int     `json:"calls"`
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.Calls += o.Calls
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CostUSD += o.CostUSD
}

// Tokens returns input plus output tokens.
func (u Usage) Tokens() int { return u.InputTokens + u.OutputTokens }

// Pricing turns token counts into a cost. Prices are in US dollars per
// million tokens.
type Pricing struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// Cost returns the cost of in input and out output tokens.
func (p Pricing) Cost(in, out int) float64 {
	return float64(in)*p.InputPerMTok/1e6 + float64(out)*p.OutputPerMTok/1e6
}

// usageFromResponse reads the token counts providers put in a choice's
// GenerationInfo: OpenAI's PromptTokens/CompletionTokens, Anthropic's
// InputTokens/OutputTokens. A count that is absent is estimated from the
// request and reply sizes.
func usageFromResponse(resp *llms.ContentResponse, estIn, estOut int, price Pricing) Usage {
	u := Usage{Calls: 1}
	in, out := -1, -1
	if resp != nil && len(resp.Choices) > 0 && resp.Choices[0] != nil {
		gi := resp.Choices[0].GenerationInfo
		in = firstInt(gi, "PromptTokens", "InputTokens", "prompt_tokens", "input_tokens")
		out = firstInt(gi, "CompletionTokens", "OutputTokens", "completion_tokens", "output_tokens")
	}
	if in < 0 {
		in = estIn
	}
	if out < 0 {
		out = estOut
	}
	u.InputTokens, u.OutputTokens = in, out
	u.CostUSD = price.Cost(in, out)
	return u
}

func firstInt(m map[string]any, keys ...string) int {
	for _, k := range keys {
		switch v := m[k].(type) {
		case int:
			return v
		case int32:
			return int(v)
		case int64:
			return int(v)
		case float64:
			return int(v)
		case float32:
			return int(v)
		}
	}
	return -1
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
	ids := make([]string, 0, len(a.convs))
	for id := range a.convs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
