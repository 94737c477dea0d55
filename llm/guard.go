package llm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
)

// Guarded is the llms.Model New returns for real providers. It wraps a
// langchaingo model with the model-level guards described in the package
// doc. It is safe for concurrent use when the wrapped model is.
type Guarded struct {
	model    llms.Model
	provider string
	redactor *Redactor
	// maxTokens is asked for when a call sets no limit; 0 leaves the
	// client's default.
	maxTokens int
}

var _ llms.Model = (*Guarded)(nil)

// Guard wraps m with the model-level guards. The provider is recognised
// from m's type (*anthropic.LLM, *openai.LLM); any other model is treated
// like an OpenAI one. Errors are redacted with the API keys found in the
// process environment. The transport-level guards (long SSE lines,
// Anthropic's malformed tool JSON) need NewTransport in the client's HTTP
// client, which New sets up.
func Guard(m llms.Model) *Guarded {
	if g, ok := m.(*Guarded); ok {
		return g
	}
	provider := ProviderOpenAI
	if _, ok := m.(*anthropic.LLM); ok {
		provider = ProviderAnthropic
	}
	return &Guarded{model: m, provider: provider, redactor: NewEnvRedactor(nil)}
}

func guardProvider(m llms.Model, provider string, r *Redactor, maxTokens int) *Guarded {
	return &Guarded{model: m, provider: provider, redactor: r, maxTokens: maxTokens}
}

// Unwrap returns the wrapped model.
func (g *Guarded) Unwrap() llms.Model { return g.model }

// Call implements llms.Model.
func (g *Guarded) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, g, prompt, options...)
}

// GenerateContent implements llms.Model.
func (g *Guarded) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var opts llms.CallOptions
	for _, o := range options {
		o(&opts)
	}
	hasTools := len(opts.Tools) > 0 || len(opts.Functions) > 0
	streaming := opts.StreamingFunc != nil || opts.StreamingReasoningFunc != nil

	// OpenAI's streamed tool calls leak into the text callback and are
	// corrupted when parallel deltas interleave: ask for the whole answer
	// instead and hand the text to the callback afterwards.
	deferStream := hasTools && streaming && g.provider != ProviderAnthropic
	if deferStream {
		options = append(append([]llms.CallOption(nil), options...), func(o *llms.CallOptions) {
			o.StreamingFunc = nil
			o.StreamingReasoningFunc = nil
		})
	}
	if opts.MaxTokens == 0 && g.maxTokens > 0 {
		// Anthropic's client would ask for 2,048, which cuts long files.
		options = append(append([]llms.CallOption(nil), options...), llms.WithMaxTokens(g.maxTokens))
	}
	if g.provider == ProviderAnthropic {
		messages = anthropicMessages(messages)
	} else {
		messages = unmarkToolErrors(messages)
	}

	ctx, info := withCallInfo(ctx)
	resp, err := g.model.GenerateContent(ctx, messages, options...)
	perr, sawUsage := info.result()
	if err != nil {
		if perr != nil {
			// langchaingo keeps little of a failure (the openai client
			// replaces network errors with a fixed text): the transport's
			// account is the one to show.
			err = perr
		}
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return nil, g.redactor.RedactError(err)
	}
	if resp == nil || len(resp.Choices) == 0 {
		return nil, errors.New("model returned no choices")
	}
	if g.provider == ProviderAnthropic {
		resp = mergeChoices(resp)
	}
	for _, c := range resp.Choices {
		normalizeChoice(c)
	}
	if !sawUsage {
		estimateUsage(resp.Choices[0], g.provider, messages, opts.Tools)
	}

	if deferStream {
		c := resp.Choices[0]
		if opts.StreamingFunc != nil && c.Content != "" {
			if err := opts.StreamingFunc(ctx, []byte(c.Content)); err != nil {
				return nil, fmt.Errorf("streaming func returned an error: %w", err)
			}
		}
		if opts.StreamingReasoningFunc != nil && (c.Content != "" || c.ReasoningContent != "") {
			if err := opts.StreamingReasoningFunc(ctx, []byte(c.ReasoningContent), []byte(c.Content)); err != nil {
				return nil, fmt.Errorf("streaming reasoning func returned an error: %w", err)
			}
		}
	}
	return resp, nil
}

// estimateUsage fills in token counts a provider did not report (some
// OpenAI-compatible servers send no usage), counted locally and marked
// InfoUsageEstimated, so that budgets still see the tokens.
func estimateUsage(c *llms.ContentChoice, provider string, messages []llms.MessageContent, tools []llms.Tool) {
	if c.GenerationInfo == nil {
		c.GenerationInfo = map[string]any{}
	}
	in := EstimatePromptTokens(messages) + EstimateToolTokens(tools)
	out := EstimateReplyTokens(c)
	if provider == ProviderAnthropic {
		c.GenerationInfo["InputTokens"], c.GenerationInfo["OutputTokens"] = in, out
		delete(c.GenerationInfo, "CacheReadInputTokens")
		delete(c.GenerationInfo, "CacheCreationInputTokens")
	} else {
		c.GenerationInfo["PromptTokens"], c.GenerationInfo["CompletionTokens"] = in, out
		c.GenerationInfo["TotalTokens"] = in + out
		delete(c.GenerationInfo, "PromptCachedTokens")
	}
	c.GenerationInfo[InfoUsageEstimated] = true
}

// unmarkToolErrors drops MarkToolError's mark for providers whose API has
// no is_error field.
func unmarkToolErrors(in []llms.MessageContent) []llms.MessageContent {
	var out []llms.MessageContent
	for i, m := range in {
		for j, p := range m.Parts {
			r, ok := p.(llms.ToolCallResponse)
			if !ok || !strings.HasPrefix(r.Content, isErrorMarker) {
				continue
			}
			if out == nil {
				out = append([]llms.MessageContent(nil), in...)
			}
			if &out[i].Parts[0] == &in[i].Parts[0] {
				out[i].Parts = append([]llms.ContentPart(nil), m.Parts...)
			}
			r.Content = strings.TrimPrefix(r.Content, isErrorMarker)
			out[i].Parts[j] = r
		}
	}
	if out == nil {
		return in
	}
	return out
}

// normalizeChoice gives every tool call the type "function", restores
// argument text the transport had to wrap, and points FuncCall at the first
// tool call.
func normalizeChoice(c *llms.ContentChoice) {
	for i := range c.ToolCalls {
		tc := &c.ToolCalls[i]
		if tc.Type == "" {
			tc.Type = "function"
		}
		if tc.FunctionCall != nil {
			tc.FunctionCall.Arguments = unwrapMalformed(tc.FunctionCall.Arguments)
		}
	}
	if len(c.ToolCalls) > 0 {
		c.FuncCall = c.ToolCalls[0].FunctionCall
	}
}

// mergeChoices folds langchaingo's Anthropic response (one choice per
// content block) into one choice: the text blocks concatenated, every
// tool call in order, thinking in ReasoningContent, and the token counts.
func mergeChoices(resp *llms.ContentResponse) *llms.ContentResponse {
	if len(resp.Choices) <= 1 {
		return resp
	}
	merged := &llms.ContentChoice{GenerationInfo: map[string]any{}}
	var text, thinking strings.Builder
	for _, c := range resp.Choices {
		if c == nil {
			continue
		}
		if merged.StopReason == "" {
			merged.StopReason = c.StopReason
		}
		text.WriteString(c.Content)
		merged.ToolCalls = append(merged.ToolCalls, c.ToolCalls...)
		for k, v := range c.GenerationInfo {
			if _, ok := merged.GenerationInfo[k]; !ok {
				merged.GenerationInfo[k] = v
			}
		}
		if t, ok := c.GenerationInfo["ThinkingContent"].(string); ok && c.Content == "" && len(c.ToolCalls) == 0 {
			thinking.WriteString(t)
		}
	}
	merged.Content = text.String()
	merged.ReasoningContent = thinking.String()
	delete(merged.GenerationInfo, "OutputContent")
	merged.GenerationInfo["ThinkingContent"] = merged.ReasoningContent
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{merged}}
}

// anthropicMessages reshapes a request for langchaingo's Anthropic client,
// which sends only the first part of an assistant or tool message and fails
// the request when a past tool call's arguments are not a JSON object:
// multi-part assistant and tool messages become one message per part (the
// transport merges consecutive same-role messages back into one turn),
// messages with no parts are dropped, and non-object arguments of past tool
// calls are wrapped so they survive the round trip.
func anthropicMessages(in []llms.MessageContent) []llms.MessageContent {
	out := make([]llms.MessageContent, 0, len(in))
	for _, m := range in {
		if len(m.Parts) == 0 {
			continue
		}
		if m.Role != llms.ChatMessageTypeAI && m.Role != llms.ChatMessageTypeTool {
			out = append(out, m)
			continue
		}
		for _, p := range m.Parts {
			switch p := p.(type) {
			case llms.TextContent:
				if p.Text == "" && len(m.Parts) > 1 {
					continue
				}
			case llms.ToolCall:
				if p.FunctionCall != nil {
					fc := *p.FunctionCall
					fc.Arguments = wrapMalformed(fc.Arguments)
					p.FunctionCall = &fc
				}
				out = append(out, llms.MessageContent{Role: m.Role, Parts: []llms.ContentPart{p}})
				continue
			}
			out = append(out, llms.MessageContent{Role: m.Role, Parts: []llms.ContentPart{p}})
		}
	}
	return out
}
