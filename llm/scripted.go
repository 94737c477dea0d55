package llm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/tmc/langchaingo/llms"
)

// Errors returned by the scripted model. Callers use errors.Is.
var (
	// ErrNoMatch means no conversation's regex matched the request's first
	// user message.
	ErrNoMatch = errors.New("scripted model: no conversation regex matched")
	// ErrScriptExhausted means the matched conversation has no reply at the
	// requested index.
	ErrScriptExhausted = errors.New("scripted model: conversation ran past its last reply")
)

var _ llms.Model = (*Scripted)(nil)

// Scripted is an llms.Model that plays a Script. It keeps no state between
// calls (the reply is chosen from the request alone), so one value is safe
// for concurrent use by any number of workers.
type Scripted struct {
	script *Script
	res    []*regexp.Regexp
	errs   []error
	// sleepFunc waits for d or until ctx is done; tests replace it.
	sleepFunc func(ctx context.Context, d time.Duration) error
}

// NewScripted returns a model that plays s. A conversation whose regex does
// not compile (possible only when s did not come from ParseScript) makes
// every call that reaches it fail with the compile error.
func NewScripted(s *Script) *Scripted {
	m := &Scripted{script: s, sleepFunc: sleepCtx}
	m.res = make([]*regexp.Regexp, len(s.Conversations))
	m.errs = make([]error, len(s.Conversations))
	for i, c := range s.Conversations {
		re, err := regexp.Compile(c.Match)
		if err != nil {
			m.errs[i] = fmt.Errorf("scripted model: conversations[%d].match: %w", i, err)
			continue
		}
		m.res[i] = re
	}
	return m
}

// Call implements llms.Model: it plays the script for a single user message
// and returns the reply's content.
func (m *Scripted) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// GenerateContent implements llms.Model. See the package doc for the rules.
func (m *Scripted) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var opts llms.CallOptions
	for _, o := range options {
		o(&opts)
	}

	first, ok := firstUserText(messages)
	if !ok {
		return nil, fmt.Errorf("%w: the request has no user message", ErrNoMatch)
	}
	conv := -1
	for i := range m.script.Conversations {
		if m.errs[i] != nil {
			return nil, m.errs[i]
		}
		if m.res[i].MatchString(first) {
			conv = i
			break
		}
	}
	if conv < 0 {
		return nil, fmt.Errorf("%w first user message %q", ErrNoMatch, truncate(first, 80))
	}
	c := m.script.Conversations[conv]
	idx := countAssistant(messages)
	if idx >= len(c.Replies) {
		return nil, fmt.Errorf("%w: conversation %d (match %q) has %d replies, request needs reply index %d",
			ErrScriptExhausted, conv, c.Match, len(c.Replies), idx)
	}
	r := c.Replies[idx]

	if r.DelayMS > 0 {
		if err := m.sleepFunc(ctx, time.Duration(r.DelayMS)*time.Millisecond); err != nil {
			return nil, err
		}
	}

	choice := &llms.ContentChoice{Content: r.Content, StopReason: "stop"}
	for i, tc := range r.ToolCalls {
		args, err := tc.ArgumentString()
		if err != nil {
			return nil, fmt.Errorf("scripted model: conversation %d reply %d tool call %d: %w", conv, idx, i, err)
		}
		choice.ToolCalls = append(choice.ToolCalls, llms.ToolCall{
			ID:           fmt.Sprintf("call_%d_%d_%d", conv, idx, i),
			Type:         "function",
			FunctionCall: &llms.FunctionCall{Name: tc.Name, Arguments: args},
		})
	}
	if len(choice.ToolCalls) > 0 {
		choice.StopReason = "tool_calls"
		choice.FuncCall = choice.ToolCalls[0].FunctionCall
	}
	prompt, completion := EstimatePromptTokens(messages), EstimateReplyTokens(choice)
	choice.GenerationInfo = map[string]any{
		"PromptTokens":     prompt,
		"CompletionTokens": completion,
		"TotalTokens":      prompt + completion,
	}

	if opts.StreamingFunc != nil && r.Content != "" {
		if err := opts.StreamingFunc(ctx, []byte(r.Content)); err != nil {
			return nil, fmt.Errorf("scripted model: streaming func: %w", err)
		}
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{choice}}, nil
}

// firstUserText returns the text parts of the first human message, joined
// with newlines.
func firstUserText(messages []llms.MessageContent) (string, bool) {
	for _, msg := range messages {
		if msg.Role != llms.ChatMessageTypeHuman {
			continue
		}
		var parts []string
		for _, p := range msg.Parts {
			if t, ok := p.(llms.TextContent); ok {
				parts = append(parts, t.Text)
			}
		}
		return strings.Join(parts, "\n"), true
	}
	return "", false
}

func countAssistant(messages []llms.MessageContent) int {
	n := 0
	for _, msg := range messages {
		if msg.Role == llms.ChatMessageTypeAI {
			n++
		}
	}
	return n
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
