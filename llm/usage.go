package llm

import (
	"strings"

	"github.com/tmc/langchaingo/llms"
)

// Usage is the token use and approximate cost of one model response.
type Usage struct {
	InputTokens  int
	OutputTokens int
	// CostUSD is InputTokens and OutputTokens priced with PriceOf; zero for
	// models the table does not know (the scripted model among them).
	CostUSD float64
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens, CostUSD: u.CostUSD + v.CostUSD}
}

// Price is a model's list price in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// prices are list prices per million tokens, looked up by the longest
// matching model-name prefix. They are approximate and drift as providers
// change prices: use them for rough budgets, not invoices. Cache reads and
// writes, batch discounts and long-context surcharges are not modelled.
var prices = map[string]Price{
	"claude-opus-4-5":   {5, 25},
	"claude-opus-4":     {15, 75},
	"claude-sonnet-4":   {3, 15},
	"claude-haiku-4":    {1, 5},
	"claude-3-7-sonnet": {3, 15},
	"claude-3-5-sonnet": {3, 15},
	"claude-3-5-haiku":  {0.8, 4},
	"claude-3-opus":     {15, 75},
	"claude-3-haiku":    {0.25, 1.25},
	"gpt-5-nano":        {0.05, 0.4},
	"gpt-5-mini":        {0.25, 2},
	"gpt-5":             {1.25, 10},
	"gpt-4.1-nano":      {0.1, 0.4},
	"gpt-4.1-mini":      {0.4, 1.6},
	"gpt-4.1":           {2, 8},
	"gpt-4o-mini":       {0.15, 0.6},
	"gpt-4o":            {2.5, 10},
	"o4-mini":           {1.1, 4.4},
	"o3-mini":           {1.1, 4.4},
	"o3":                {2, 8},
	"o1":                {15, 60},
}

// PriceOf returns the approximate list price of a model, by the longest
// known prefix of its name. A model spec ("anthropic:claude-sonnet-4-5")
// is accepted too. ok is false for unknown models.
func PriceOf(model string) (p Price, ok bool) {
	if s, err := ParseSpec(model); err == nil {
		model = s.Model
	}
	model = strings.ToLower(model)
	best := -1
	for prefix, price := range prices {
		if strings.HasPrefix(model, prefix) && len(prefix) > best {
			p, best = price, len(prefix)
		}
	}
	return p, best >= 0
}

// UsageOf reads token counts from a response's GenerationInfo, whichever
// provider made it: "InputTokens"/"OutputTokens" (Anthropic) or
// "PromptTokens"/"CompletionTokens" (OpenAI, openai-compatible servers that
// report usage, and the scripted model's estimates). Counts describe the
// whole response, so the first choice that has them is used. model prices
// the result (see PriceOf); pass "" to skip pricing.
func UsageOf(resp *llms.ContentResponse, model string) Usage {
	var u Usage
	if resp == nil {
		return u
	}
	for _, c := range resp.Choices {
		if c == nil {
			continue
		}
		in, okIn := firstInt(c.GenerationInfo, "InputTokens", "PromptTokens")
		out, okOut := firstInt(c.GenerationInfo, "OutputTokens", "CompletionTokens")
		if okIn || okOut {
			u.InputTokens, u.OutputTokens = in, out
			break
		}
	}
	if p, ok := PriceOf(model); ok {
		u.CostUSD = (float64(u.InputTokens)*p.InputPerMTok + float64(u.OutputTokens)*p.OutputPerMTok) / 1e6
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
