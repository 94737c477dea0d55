package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/openai"
)

// Default API base URLs.
const (
	AnthropicBaseURL = "https://api.anthropic.com/v1"
	OpenAIBaseURL    = "https://api.openai.com/v1"
)

// placeholderKey is sent to openai-compatible servers when OPENAI_API_KEY
// is not set; most local servers ignore the key.
const placeholderKey = "taskloom-no-key"

// ErrMissingKey is wrapped by New when a provider's API key variable is
// not set.
var ErrMissingKey = errors.New("missing API key")

// Opts configures New. A nil *Opts means defaults.
type Opts struct {
	// HTTPClient is the client provider models use; nil means a client
	// with http.DefaultTransport. New wraps its transport with
	// NewTransport (a copy: the client passed in is not modified).
	HTTPClient *http.Client
	// BaseURL overrides the provider's API base URL (tests point it at a
	// local server), including the URL of an openai-compatible spec.
	BaseURL string
	// GetenvFunc reads environment variables; nil means os.Getenv.
	GetenvFunc func(string) string
}

// New builds the model a spec names (see ParseSpec). Scripted specs give a
// *Scripted; provider specs give a *Guarded wrapping the langchaingo client
// with the guards of the package doc. Provider models make no request
// until they are called.
func New(ctx context.Context, spec string, opts *Opts) (llms.Model, error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &Opts{}
	}
	getenv := opts.GetenvFunc
	if getenv == nil {
		getenv = os.Getenv
	}
	redactor := NewEnvRedactor(getenv)

	base := opts.HTTPClient
	if base == nil {
		base = &http.Client{}
	}
	client := *base
	client.Transport = NewTransport(base.Transport, s.Provider)

	switch s.Provider {
	case ProviderScripted:
		script, err := LoadScript(s.Path)
		if err != nil {
			return nil, fmt.Errorf("model spec %q: %w", spec, err)
		}
		return NewScripted(script), nil

	case ProviderAnthropic:
		key := getenv("ANTHROPIC_API_KEY")
		if key == "" {
			return nil, fmt.Errorf("model spec %q: %w: set ANTHROPIC_API_KEY", spec, ErrMissingKey)
		}
		m, err := anthropic.New(
			anthropic.WithToken(key),
			anthropic.WithModel(s.Model),
			anthropic.WithBaseURL(firstNonEmpty(opts.BaseURL, AnthropicBaseURL)),
			anthropic.WithHTTPClient(&client),
		)
		if err != nil {
			return nil, fmt.Errorf("model spec %q: %w", spec, redactor.RedactError(err))
		}
		return guardProvider(m, ProviderAnthropic, redactor), nil

	case ProviderOpenAI, ProviderOpenAICompatible:
		key := getenv("OPENAI_API_KEY")
		baseURL := OpenAIBaseURL
		if s.Provider == ProviderOpenAICompatible {
			baseURL = s.BaseURL
			if key == "" {
				key = placeholderKey
			}
		}
		if key == "" {
			return nil, fmt.Errorf("model spec %q: %w: set OPENAI_API_KEY", spec, ErrMissingKey)
		}
		m, err := openai.New(
			openai.WithToken(key),
			openai.WithModel(s.Model),
			openai.WithBaseURL(firstNonEmpty(opts.BaseURL, baseURL)),
			openai.WithOrganization(getenv("OPENAI_ORGANIZATION")),
			openai.WithHTTPClient(&client),
		)
		if err != nil {
			return nil, fmt.Errorf("model spec %q: %w", spec, redactor.RedactError(err))
		}
		return guardProvider(m, s.Provider, redactor), nil
	}
	return nil, fmt.Errorf("model spec %q: provider %s has no constructor", spec, s.Provider)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// KeyVariables names the environment variables the providers read their
// keys from. An external agent CLI keeps them in its sandbox, and their
// values are redacted everywhere.
func KeyVariables() []string {
	return []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
}
