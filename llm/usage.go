package llm

import (
	"github.com/tmc/langchaingo/llms"
)

// Usage is the token use and cost of one or more model responses.
type Usage struct {
	// InputTokens excludes the tokens read from or written to the prompt
	// cache, which are counted apart.
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	CacheReadTokens  int `json:"cache_read_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens"`
	// CostUSD prices the tokens with PriceOf; zero for models the table
	// does not know (the scripted model among them).
	CostUSD float64 `json:"cost_usd"`
	// Estimated: the provider reported no usage, so the counts were made
	// locally (one token per four bytes).
	Estimated bool `json:"estimated"`
	// Unreported: an agent CLI made model calls and reported no usage
	// for them, so they are in none of the counts.
	Unreported bool `json:"unreported,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CacheReadTokens: u.CacheReadTokens + v.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		CostUSD: u.CostUSD + v.CostUSD, Estimated: u.Estimated || v.Estimated, Unreported: u.Unreported || v.Unreported,
	}
}

// Sub returns what u used beyond v. Estimated and Unreported stay u's.
func (u Usage) Sub(v Usage) Usage {
	return Usage{
		InputTokens: u.InputTokens - v.InputTokens, OutputTokens: u.OutputTokens - v.OutputTokens,
		CacheReadTokens: u.CacheReadTokens - v.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens - v.CacheWriteTokens,
		CostUSD: u.CostUSD - v.CostUSD, Estimated: u.Estimated, Unreported: u.Unreported,
	}
}

// Tokens returns every token counted: input, output and cached input.
func (u Usage) Tokens() int {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// GenerationInfo keys the guarded model adds to a choice.
const (
	// InfoUsageEstimated is true when the provider sent no usage and the
	// token counts were estimated locally.
	InfoUsageEstimated = "UsageEstimated"
)

// UsageOf reads token counts from a response's GenerationInfo, whichever
// provider made it: Anthropic's InputTokens, OutputTokens,
// CacheReadInputTokens and CacheCreationInputTokens (its input already
// excludes the cache), OpenAI's PromptTokens, CompletionTokens and
// PromptCachedTokens (its prompt includes the cached part, which is taken
// out), and the scripted model's estimates. Counts describe the whole
// response, so the first choice that has them is used. model prices the
// result (see PriceOf); pass "" to skip pricing.
func UsageOf(resp *llms.ContentResponse, model string) Usage {
	var u Usage
	if resp == nil {
		return u
	}
	for _, c := range resp.Choices {
		if c == nil {
			continue
		}
		gi := c.GenerationInfo
		if in, ok := firstInt(gi, "InputTokens"); ok {
			u.InputTokens = in
			u.OutputTokens, _ = firstInt(gi, "OutputTokens")
			u.CacheReadTokens, _ = firstInt(gi, "CacheReadInputTokens")
			u.CacheWriteTokens, _ = firstInt(gi, "CacheCreationInputTokens")
		} else if in, ok := firstInt(gi, "PromptTokens"); ok {
			cached, _ := firstInt(gi, "PromptCachedTokens")
			cached = min(max(cached, 0), in)
			u.InputTokens, u.CacheReadTokens = in-cached, cached
			u.OutputTokens, _ = firstInt(gi, "CompletionTokens")
		} else if out, ok := firstInt(gi, "OutputTokens", "CompletionTokens"); ok {
			u.OutputTokens = out
		} else {
			continue
		}
		u.Estimated, _ = gi[InfoUsageEstimated].(bool)
		break
	}
	if p, ok := PriceOf(model); ok {
		u.CostUSD = p.Cost(u)
	}
	return u
}

func firstInt(info map[string]any, keys ...string) (int, bool) {
	for _, k := range keys {
		switch v := info[k].(type) {
		case int:
			return v, true
		case int32:
			return int(v), true
		case int64:
			return int(v), true
		case float64:
			return int(v), true
		}
	}
	return 0, false
}
