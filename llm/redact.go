package llm

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// KeyEnvVars are the environment variables that hold provider API keys.
var KeyEnvVars = []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}

// Redacted replaces secrets in redacted text.
const Redacted = "[REDACTED]"

// keyPatterns match API keys by shape, so a key is redacted even when it
// did not come from the environment this process sees.
var keyPatterns = regexp.MustCompile(`sk-ant-[A-Za-z0-9_\-]{8,}|sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{20,}|(?i:bearer)\s+[A-Za-z0-9._\-]{16,}`)

// minSecretLen is the shortest value treated as a secret; shorter values
// would redact ordinary words.
const minSecretLen = 8

// Redactor removes known secret values from text.
type Redactor struct {
	secrets []string // longest first, so a key containing another is removed whole
}

// NewRedactor returns a Redactor for the given secret values. Empty values
// and values shorter than 8 bytes are ignored.
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < minSecretLen || seen[s] {
			continue
		}
		seen[s] = true
		r.secrets = append(r.secrets, s)
	}
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

// With returns a Redactor for r's secrets and more.
func (r *Redactor) With(more ...string) *Redactor {
	return NewRedactor(append(slices.Clone(r.secrets), more...)...)
}

// NewEnvRedactor returns a Redactor for the values of KeyEnvVars and of
// the extra variables (such as llm.api_key_env's), read through getenv
// (nil means os.Getenv).
func NewEnvRedactor(getenv func(string) string, extra ...string) *Redactor {
	if getenv == nil {
		getenv = os.Getenv
	}
	var vals []string
	for _, k := range append(append([]string(nil), KeyEnvVars...), extra...) {
		if k == "" {
			continue
		}
		vals = append(vals, getenv(k))
	}
	return NewRedactor(vals...)
}

// Redact replaces every known secret, and anything shaped like an API key
// or a bearer token, with [REDACTED].
func (r *Redactor) Redact(s string) string {
	if r != nil {
		for _, sec := range r.secrets {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return keyPatterns.ReplaceAllString(s, Redacted)
}

// RedactError returns err with its message redacted, or err itself when
// there is nothing to redact. The result unwraps to err, so errors.Is and
// errors.As keep working; code that prints an unwrapped error bypasses the
// redaction.
func (r *Redactor) RedactError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := r.Redact(msg)
	if red == msg {
		return err
	}
	return &redactedError{msg: red, err: err}
}

// Redact removes the values of KeyEnvVars (read now from the process
// environment) and anything shaped like an API key from s.
func Redact(s string) string {
	return NewEnvRedactor(nil).Redact(s)
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
