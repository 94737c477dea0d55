package llm

import (
	"context"
	"sync"

	"github.com/tmc/langchaingo/llms"
)

// Meter is a model that adds up the usage of the calls made through it.
// It is safe for concurrent use when the wrapped model is.
type Meter struct {
	model llms.Model
	spec  string
	mu    sync.Mutex
	used  Usage
}

var _ llms.Model = (*Meter)(nil)

// NewMeter wraps m; spec prices the usage (see PriceOf).
func NewMeter(m llms.Model, spec string) *Meter { return &Meter{model: m, spec: spec} }

// Usage returns the usage so far.
func (m *Meter) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

// Call implements llms.Model.
func (m *Meter) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// GenerateContent implements llms.Model.
func (m *Meter) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	resp, err := m.model.GenerateContent(ctx, messages, options...)
	if err == nil {
		u := UsageOf(resp, m.spec)
		m.mu.Lock()
		m.used = m.used.Add(u)
		m.mu.Unlock()
	}
	return resp, err
}
