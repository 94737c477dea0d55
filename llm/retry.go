package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/taskloom/taskloom/internal/clip"
)

// ErrRetriesExhausted is wrapped by a *ProviderError whose request failed
// in a way worth retrying (a rate limit, an overload, a server error, a
// reset, the request timeout) every time it was tried.
var ErrRetriesExhausted = errors.New("provider retries exhausted")

// errRequestTimeout is the cause of a request cut by llm.request_timeout.
var errRequestTimeout = errors.New("request timed out")

// Kinds of provider failure, as ProviderError.Kind and WaitInfo.Reason
// name them.
const (
	KindRateLimit  = "rate_limit"   // 429, or pacing to requests_per_minute
	KindOverloaded = "overloaded"   // 529
	KindServer     = "server_error" // other 5xx, 408
	KindReset      = "connection"   // reset, refused, closed early
	KindTimeout    = "timeout"      // llm.request_timeout
	KindRequest    = "request"      // any other status: the request itself is wrong
)

// ProviderError is a provider request that failed for good: one that is
// not worth retrying, or one whose retries ran out.
type ProviderError struct {
	Provider string
	// Status is the HTTP status; 0 when no response came.
	Status int
	Kind   string
	// Message is what the provider said, taken from its error body in
	// whichever common shape it came, with secrets redacted.
	Message string
	// Requests counts the requests made, the first one included.
	Requests int
	// Retryable: the failure was of a retried kind and the retries ran out.
	Retryable bool
	Err       error
}

// Refused reports a provider that turned down the key (401, 403): every
// request of every task would be refused alike, until a person fixes the
// key, which a run reads from the environment again when it resumes. (A
// model or a base URL the provider does not know, 404, is part of the
// run, which keeps it: its tasks pause for review instead.)
func (e *ProviderError) Refused() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

func (e *ProviderError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", e.Provider)
	if e.Status > 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	fmt.Fprintf(&b, " (%s)", e.Kind)
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Retryable {
		fmt.Fprintf(&b, "; gave up after %d requests (llm.max_retries)", e.Requests)
	}
	return b.String()
}

// Unwrap returns ErrRetriesExhausted for a retryable failure and the
// transport error, if any.
func (e *ProviderError) Unwrap() []error {
	var errs []error
	if e.Retryable {
		errs = append(errs, ErrRetriesExhausted)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// kindOfStatus classifies a non-200 status; retry says whether it is
// worth retrying.
func kindOfStatus(status int) (kind string, retry bool) {
	switch {
	case status == http.StatusTooManyRequests:
		return KindRateLimit, true
	case status == 529:
		return KindOverloaded, true
	case status == http.StatusRequestTimeout || status >= 500:
		return KindServer, true
	}
	return KindRequest, false
}

// Backoff computes full-jitter exponential backoff: a wait drawn uniformly
// from [0, min(Max, Base·2^retry)).
type Backoff struct {
	Base, Max time.Duration
	// RandFunc returns a float in [0, 1); nil means math/rand/v2.
	RandFunc func() float64
}

// Delay returns the wait before retry number retry (from 0).
func (b Backoff) Delay(retry int) time.Duration {
	ceil := b.Max
	if retry < 30 {
		if d := b.Base << retry; d > 0 && d < ceil {
			ceil = d
		}
	}
	r := b.RandFunc
	if r == nil {
		r = rand.Float64
	}
	return time.Duration(r() * float64(ceil))
}

// maxHonoured caps a retry-after or rate-limit reset: a provider asking
// for longer is treated as asking for this long, and the retries go on.
const maxHonoured = 5 * time.Minute

// retryAfter reads how long a response asks the client to wait, from
// retry-after-ms, retry-after (seconds or an HTTP date), and the
// providers' rate-limit reset headers (Anthropic's RFC 3339 times,
// OpenAI's durations such as "1s" or "6m0s"); the reset headers count
// for a 429 only, or for any response whose remaining count is 0. ok is
// false when the response names no wait.
func retryAfter(h http.Header, status int, now time.Time) (time.Duration, bool) {
	// A wait of zero or less (retry-after: 0, a date gone by) names no
	// wait: taken literally, every retry would be spent at once.
	if ms, err := strconv.ParseFloat(h.Get("retry-after-ms"), 64); err == nil && ms > 0 {
		return min(time.Duration(ms*float64(time.Millisecond)), maxHonoured), true
	}
	if v := strings.TrimSpace(h.Get("retry-after")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
			return min(time.Duration(s*float64(time.Second)), maxHonoured), true
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return min(t.Sub(now), maxHonoured), true
		}
	}
	var wait time.Duration
	found := false
	for _, p := range []struct{ remaining, reset string }{
		{"anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"},
		{"anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset"},
		{"anthropic-ratelimit-input-tokens-remaining", "anthropic-ratelimit-input-tokens-reset"},
		{"anthropic-ratelimit-output-tokens-remaining", "anthropic-ratelimit-output-tokens-reset"},
		{"x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"},
		{"x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens"},
	} {
		reset := strings.TrimSpace(h.Get(p.reset))
		if reset == "" || (status != http.StatusTooManyRequests && strings.TrimSpace(h.Get(p.remaining)) != "0") {
			continue
		}
		var d time.Duration
		if t, err := time.Parse(time.RFC3339, reset); err == nil {
			d = t.Sub(now)
		} else if pd, err := time.ParseDuration(reset); err == nil {
			d = pd
		} else {
			continue
		}
		found = true
		wait = max(wait, d)
	}
	return min(wait, maxHonoured), found && wait > 0
}

// errorMessage finds the message in an error body of any of the shapes
// providers and compatible servers use: {"error": {"message"}} (OpenAI,
// Anthropic), {"error": "text"} (Ollama), {"message", "object": "error"}
// (vLLM), {"detail": "text" or [{"msg"}]} (FastAPI servers), a list of
// those, or plain text. The text is trimmed and capped.
func errorMessage(body []byte) string {
	const limit = 2000
	text := strings.TrimSpace(string(body))
	var v any
	if json.Unmarshal(body, &v) == nil {
		if m := messageIn(v, 0); m != "" {
			text = m
		}
	}
	return clip.Head(text, limit)
}

func messageIn(v any, depth int) string {
	if depth > 3 {
		return ""
	}
	switch v := v.(type) {
	case string:
		return strings.TrimSpace(v)
	case []any:
		var parts []string
		for _, e := range v {
			if m := messageIn(e, depth+1); m != "" {
				parts = append(parts, m)
			}
		}
		return strings.Join(parts, "; ")
	case map[string]any:
		for _, k := range []string{"error", "message", "detail", "msg", "error_message"} {
			m := messageIn(v[k], depth+1)
			if m == "" {
				continue
			}
			// vLLM puts the kind beside the message.
			if typ, _ := v["type"].(string); k == "message" && v["object"] == "error" && typ != "" && !strings.Contains(m, typ) {
				return typ + ": " + m
			}
			return m
		}
	}
	return ""
}
