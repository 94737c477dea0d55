package llm

import "strings"

// PricesAsOf is the date the price table was last checked against the
// providers' published list prices.
const PricesAsOf = "2025-11-01"

// Price is a model's list price in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
	// CacheReadPerMTok prices input read from the prompt cache.
	CacheReadPerMTok float64
	// CacheWritePerMTok prices input written to the prompt cache
	// (Anthropic's 5-minute cache; OpenAI charges plain input).
	CacheWritePerMTok float64
}

// Cost returns the cost of u at p.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.InputTokens)*p.InputPerMTok + float64(u.OutputTokens)*p.OutputPerMTok +
		float64(u.CacheReadTokens)*p.CacheReadPerMTok + float64(u.CacheWriteTokens)*p.CacheWritePerMTok) / 1e6
}

// prices are the list prices of PricesAsOf, looked up by the longest
// matching model-name prefix. Anthropic's cache writes cost 1.25× input
// and reads 0.1×; OpenAI's cached input costs what its price page says
// (0.1× to 0.5× input) and writing the cache costs nothing extra. Batch
// discounts and long-context surcharges are not modelled. A model missing
// here gets no cost at all rather than a guessed one.
var prices = map[string]Price{
	"claude-opus-4-5":   {5, 25, 0.5, 6.25},
	"claude-opus-4":     {15, 75, 1.5, 18.75},
	"claude-sonnet-4":   {3, 15, 0.3, 3.75},
	"claude-haiku-4":    {1, 5, 0.1, 1.25},
	"claude-3-7-sonnet": {3, 15, 0.3, 3.75},
	"claude-3-5-sonnet": {3, 15, 0.3, 3.75},
	"claude-3-5-haiku":  {0.8, 4, 0.08, 1},
	"claude-3-opus":     {15, 75, 1.5, 18.75},
	"claude-3-haiku":    {0.25, 1.25, 0.03, 0.3},
	"gpt-5-nano":        {0.05, 0.4, 0.005, 0.05},
	"gpt-5-mini":        {0.25, 2, 0.025, 0.25},
	"gpt-5":             {1.25, 10, 0.125, 1.25},
	"gpt-4.1-nano":      {0.1, 0.4, 0.025, 0.1},
	"gpt-4.1-mini":      {0.4, 1.6, 0.1, 0.4},
	"gpt-4.1":           {2, 8, 0.5, 2},
	"gpt-4o-mini":       {0.15, 0.6, 0.075, 0.15},
	"gpt-4o":            {2.5, 10, 1.25, 2.5},
	"o4-mini":           {1.1, 4.4, 0.275, 1.1},
	"o3-mini":           {1.1, 4.4, 0.55, 1.1},
	"o3":                {2, 8, 0.5, 2},
	"o1":                {15, 60, 7.5, 15},
}

// PriceOf returns the list price of a model, by the longest known prefix of
// its name. A model spec is accepted too: "anthropic:claude-sonnet-4-5" is
// priced, while openai-compatible and scripted specs never are (a local
// server's "gpt-4o" is not OpenAI's). ok is false for unknown models.
func PriceOf(model string) (p Price, ok bool) {
	if s, err := ParseSpec(model); err == nil {
		if s.Provider != ProviderAnthropic && s.Provider != ProviderOpenAI {
			return Price{}, false
		}
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
