package llm

import (
	"encoding/json"

	"github.com/tmc/langchaingo/llms"
)

// EstimateTokens approximates a token count as one token per four bytes,
// rounded up. It is an estimate for accounting and condensing, not a
// tokenizer: usage a provider reports always wins over it.
func EstimateTokens(s string) int {
	return (len(s) + 3) / 4
}

// EstimatePromptTokens estimates the input tokens of messages: their text,
// tool calls and tool results, plus four per message, roughly as chat APIs
// count their framing.
func EstimatePromptTokens(messages []llms.MessageContent) int {
	n := 0
	for _, msg := range messages {
		n += 4
		for _, p := range msg.Parts {
			switch p := p.(type) {
			case llms.TextContent:
				n += EstimateTokens(p.Text)
			case llms.ToolCall:
				if p.FunctionCall != nil {
					n += EstimateTokens(p.FunctionCall.Name) + EstimateTokens(p.FunctionCall.Arguments)
				}
			case llms.ToolCallResponse:
				n += EstimateTokens(p.Content)
			}
		}
	}
	return n
}

// EstimateToolTokens estimates the input tokens of tool definitions.
func EstimateToolTokens(tools []llms.Tool) int {
	if len(tools) == 0 {
		return 0
	}
	data, err := json.Marshal(tools)
	if err != nil {
		return 0
	}
	return EstimateTokens(string(data))
}

// EstimateReplyTokens estimates the output tokens of a choice: its text
// and its tool calls.
func EstimateReplyTokens(c *llms.ContentChoice) int {
	if c == nil {
		return 0
	}
	n := EstimateTokens(c.Content)
	for _, tc := range c.ToolCalls {
		if tc.FunctionCall != nil {
			n += EstimateTokens(tc.FunctionCall.Name) + EstimateTokens(tc.FunctionCall.Arguments)
		}
	}
	return n
}
