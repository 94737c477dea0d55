package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/openai"
)

// Default API base URLs. AnthropicBaseURL is the API root, as
// ANTHROPIC_BASE_URL is: requests go to its /v1/messages. OpenAIBaseURL
// includes /v1, as OPENAI_BASE_URL does.
const (
	AnthropicBaseURL = "https://api.anthropic.com"
	OpenAIBaseURL    = "https://api.openai.com/v1"
)

// placeholderKey satisfies langchaingo's openai client, which needs a key,
// for an openai-compatible server without llm.api_key_env; the transport
// removes it, so nothing is sent.
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

	// MaxTokens is the output limit a call asks for when it sets none;
	// 0 means 16000.
	MaxTokens int
	// RequestTimeout bounds each try of a request (a stream, each
	// stretch without data); 0 means 5m.
	RequestTimeout time.Duration
	// MaxRetries bounds the retries of a failed request; 0 means 8, and a
	// negative value retries nothing.
	MaxRetries int
	// Limiter is shared by every request of the model; nil makes one at
	// RequestsPerMinute.
	Limiter *Limiter
	// RequestsPerMinute paces the model's requests when Limiter is nil;
	// 0 paces nothing (429s still pause every request).
	RequestsPerMinute int
	// NoPromptCache turns Anthropic prompt caching off.
	NoPromptCache bool
	// APIKeyEnv names the variable whose value is an openai-compatible
	// server's key; empty sends none.
	APIKeyEnv string
	// WaitFunc hears of each wait for the provider (see TransportOpts).
	WaitFunc func(WaitInfo)
	// Secrets are more values to redact from what the provider sends back
	// (an error body may echo a request): the environment's secrets, say.
	Secrets []string
	// Backoff, SleepFunc and NowFunc time the retries (see TransportOpts);
	// tests stub them.
	Backoff   Backoff
	SleepFunc func(context.Context, time.Duration) error
	NowFunc   func() time.Time
}

// Defaults of Opts.
const (
	DefaultMaxTokens      = 16000
	DefaultRequestTimeout = 5 * time.Minute
	DefaultMaxRetries     = 8
)

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
	if s.Provider == ProviderScripted {
		script, err := LoadScript(s.Path)
		if err != nil {
			return nil, fmt.Errorf("model spec %q: %w", spec, err)
		}
		return NewScripted(script), nil
	}
	redactor := NewEnvRedactor(getenv, opts.APIKeyEnv).With(opts.Secrets...)
	maxTokens := cmp.Or(opts.MaxTokens, DefaultMaxTokens)
	retries := cmp.Or(opts.MaxRetries, DefaultMaxRetries)
	if retries < 0 {
		retries = 0
	}
	limiter := opts.Limiter
	if limiter == nil {
		limiter = NewLimiter(opts.RequestsPerMinute, &LimiterOpts{NowFunc: opts.NowFunc, SleepFunc: opts.SleepFunc})
	}
	base := opts.HTTPClient
	if base == nil {
		base = &http.Client{}
	}
	client := *base
	client.Transport = NewTransportWith(base.Transport, &TransportOpts{
		Provider: s.Provider, MaxRetries: retries, RequestTimeout: cmp.Or(opts.RequestTimeout, DefaultRequestTimeout),
		Limiter: limiter, PromptCache: !opts.NoPromptCache, Backoff: opts.Backoff, SleepFunc: opts.SleepFunc,
		NowFunc: opts.NowFunc, WaitFunc: opts.WaitFunc, Redactor: redactor,
	})

	switch s.Provider {
	case ProviderAnthropic:
		key := getenv("ANTHROPIC_API_KEY")
		if key == "" {
			return nil, fmt.Errorf("model spec %q: %w: set ANTHROPIC_API_KEY", spec, ErrMissingKey)
		}
		root := strings.TrimSuffix(cmp.Or(opts.BaseURL, getenv("ANTHROPIC_BASE_URL"), AnthropicBaseURL), "/")
		if err := keySafe(root); err != nil {
			return nil, fmt.Errorf("model spec %q: ANTHROPIC_BASE_URL: %w", spec, err)
		}
		m, err := anthropic.New(
			anthropic.WithToken(key),
			anthropic.WithModel(s.Model),
			anthropic.WithBaseURL(root+"/v1"),
			anthropic.WithHTTPClient(&client),
		)
		if err != nil {
			return nil, fmt.Errorf("model spec %q: %w", spec, redactor.RedactError(err))
		}
		return guardProvider(m, ProviderAnthropic, redactor, maxTokens), nil

	case ProviderOpenAI, ProviderOpenAICompatible:
		var key, baseURL string
		if s.Provider == ProviderOpenAI {
			key = getenv("OPENAI_API_KEY")
			if key == "" {
				return nil, fmt.Errorf("model spec %q: %w: set OPENAI_API_KEY", spec, ErrMissingKey)
			}
			baseURL = cmp.Or(opts.BaseURL, getenv("OPENAI_BASE_URL"), OpenAIBaseURL)
		} else {
			// A compatible server gets a key only from the variable the
			// config names: OPENAI_API_KEY is OpenAI's, not a local
			// server's.
			if opts.APIKeyEnv != "" {
				key = getenv(opts.APIKeyEnv)
				if key == "" {
					return nil, fmt.Errorf("model spec %q: %w: llm.api_key_env names %s, which is not set", spec, ErrMissingKey, opts.APIKeyEnv)
				}
			}
			baseURL = cmp.Or(opts.BaseURL, s.BaseURL)
		}
		if key != "" {
			if err := keySafe(baseURL); err != nil {
				return nil, fmt.Errorf("model spec %q: %w", spec, err)
			}
		}
		m, err := openai.New(
			openai.WithToken(cmp.Or(key, placeholderKey)),
			openai.WithModel(s.Model),
			openai.WithBaseURL(baseURL),
			openai.WithOrganization(getenv("OPENAI_ORGANIZATION")),
			openai.WithHTTPClient(&client),
		)
		if err != nil {
			return nil, fmt.Errorf("model spec %q: %w", spec, redactor.RedactError(err))
		}
		return guardProvider(m, s.Provider, redactor, maxTokens), nil
	}
	return nil, fmt.Errorf("model spec %q: provider %s has no constructor", spec, s.Provider)
}

// keySafe refuses a base URL a key must not be sent to: plain http to a
// host other than loopback.
func keySafe(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("base URL %q: %w", base, err)
	}
	if u.Scheme == "http" && !IsLoopback(u.Hostname()) {
		return fmt.Errorf("%w: refusing to send an API key over plain http to %s; use https, or a loopback address", ErrInsecureKey, u.Host)
	}
	return nil
}

// KeyVariables names the environment variables the providers read their
// keys from. An external agent CLI keeps them in its sandbox, and their
// values are redacted everywhere.
func KeyVariables() []string {
	return []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
}
