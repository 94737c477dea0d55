package llm

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Provider names accepted in a model spec.
const (
	ProviderScripted         = "scripted"
	ProviderAnthropic        = "anthropic"
	ProviderOpenAI           = "openai"
	ProviderOpenAICompatible = "openai-compatible"
)

// acceptedForms is quoted by every spec error.
const acceptedForms = `accepted forms: "anthropic:MODEL", "openai:MODEL", "openai-compatible:MODEL@BASE_URL", "scripted:PATH"`

// ErrBadSpec is wrapped by every error ParseSpec returns.
var ErrBadSpec = errors.New("bad model spec")

// Spec is a parsed model spec.
type Spec struct {
	// Provider is one of the Provider* constants.
	Provider string
	// Model is the provider's model name (empty for scripted).
	Model string
	// BaseURL is set for openai-compatible.
	BaseURL string
	// Path is the script file for scripted.
	Path string
}

// String returns the spec in its textual form.
func (s Spec) String() string {
	switch s.Provider {
	case ProviderScripted:
		return s.Provider + ":" + s.Path
	case ProviderOpenAICompatible:
		return s.Provider + ":" + s.Model + "@" + s.BaseURL
	default:
		return s.Provider + ":" + s.Model
	}
}

// ParseSpec parses "PROVIDER:REST". The provider is the text before the
// first colon, so model names may contain colons ("llama3.1:8b"). For
// openai-compatible the base URL starts at the first "@http://" or
// "@https://", so model names may contain "@".
func ParseSpec(spec string) (Spec, error) {
	bad := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("%w %q: %s; %s", ErrBadSpec, spec, fmt.Sprintf(format, args...), acceptedForms)
	}
	provider, rest, ok := strings.Cut(strings.TrimSpace(spec), ":")
	if !ok {
		return bad("missing \"PROVIDER:\" prefix")
	}
	switch provider {
	case ProviderScripted:
		if rest == "" {
			return bad("missing script path")
		}
		return Spec{Provider: provider, Path: rest}, nil
	case ProviderAnthropic, ProviderOpenAI:
		if rest == "" {
			return bad("missing model name")
		}
		return Spec{Provider: provider, Model: rest}, nil
	case ProviderOpenAICompatible:
		i := strings.Index(rest, "@http://")
		if j := strings.Index(rest, "@https://"); i < 0 || (j >= 0 && j < i) {
			i = j
		}
		if i < 0 {
			return bad("missing \"@BASE_URL\" (an http:// or https:// URL) after the model name")
		}
		model, base := rest[:i], rest[i+1:]
		if model == "" {
			return bad("missing model name before \"@\"")
		}
		u, err := url.Parse(base)
		if err != nil || u.Host == "" {
			return bad("base URL %q is not an absolute http(s) URL", base)
		}
		return Spec{Provider: provider, Model: model, BaseURL: base}, nil
	case "ollama":
		return bad("langchaingo's ollama client drops tool definitions, so the coding agent cannot work through it; use \"openai-compatible:MODEL@http://localhost:11434/v1\" instead")
	case "":
		return bad("missing provider before \":\"")
	default:
		return bad("unknown provider %q", provider)
	}
}
