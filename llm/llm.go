package llm

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tmc/langchaingo/llms"
)

// Opts configures New. A nil *Opts means defaults.
type Opts struct {
	// HTTPClient is used by provider clients; nil means http.DefaultClient.
	HTTPClient *http.Client
	// BaseURL overrides the provider's API base URL (tests point it at a
	// local server). For openai-compatible the spec's URL is used unless
	// this is set.
	BaseURL string
	// GetenvFunc reads environment variables; nil means os.Getenv.
	GetenvFunc func(string) string
}

// New builds the model a spec names. See ParseSpec for the forms.
func New(ctx context.Context, spec string, opts *Opts) (llms.Model, error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &Opts{}
	}
	switch s.Provider {
	case ProviderScripted:
		script, err := LoadScript(s.Path)
		if err != nil {
			return nil, err
		}
		return NewScripted(script), nil
	default:
		return nil, fmt.Errorf("model spec %q: provider %s is not wired yet", spec, s.Provider)
	}
}
