package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/llms"
)

// ErrMalformedToolCall is wrapped by every error ValidateToolCall returns.
var ErrMalformedToolCall = errors.New("malformed tool call")

// ToolCallError describes a tool call whose arguments cannot be used. Its
// message is written to be fed back to the model as the tool result.
type ToolCallError struct {
	ID        string
	Name      string
	Arguments string
	Err       error
}

func (e *ToolCallError) Error() string {
	name := e.Name
	if name == "" {
		name = "(no name)"
	}
	return fmt.Sprintf("tool call %s (id %s): %v; the call was not executed, send it again with its arguments as one complete JSON object",
		name, e.ID, e.Err)
}

func (e *ToolCallError) Unwrap() []error { return []error{ErrMalformedToolCall, e.Err} }

// ValidateToolCall checks that a tool call has a name and that its
// arguments are one JSON object (an empty string counts as {}). langchaingo
// hands back whatever argument text the provider sent, so call this before
// executing any tool call; the returned *ToolCallError's message is meant
// to go back to the model as the tool result.
func ValidateToolCall(tc llms.ToolCall) error {
	_, err := ToolArguments(tc)
	return err
}

// ToolArguments validates a tool call like ValidateToolCall and returns its
// arguments as raw JSON values by key.
func ToolArguments(tc llms.ToolCall) (map[string]json.RawMessage, error) {
	fail := func(name, args string, err error) (map[string]json.RawMessage, error) {
		return nil, &ToolCallError{ID: tc.ID, Name: name, Arguments: args, Err: err}
	}
	if tc.FunctionCall == nil {
		return fail("", "", errors.New("it has no function name or arguments"))
	}
	name, args := tc.FunctionCall.Name, tc.FunctionCall.Arguments
	if name == "" {
		return fail(name, args, errors.New("it has no function name"))
	}
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return map[string]json.RawMessage{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return fail(name, args, fmt.Errorf("arguments are not valid JSON (%v): %s", jsonErrorDetail(err, args), quoteArgs(args)))
	}
	if m == nil {
		return fail(name, args, fmt.Errorf("arguments must be a JSON object, got null"))
	}
	if dec.More() || dec.InputOffset() != int64(len(trimmed)) {
		return fail(name, args, fmt.Errorf("arguments have data after the JSON object: %s", quoteArgs(args)))
	}
	return m, nil
}

func jsonErrorDetail(err error, s string) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typ):
		return fmt.Sprintf("expected an object, got %s", typ.Value)
	case errors.As(err, &syn):
		return fmt.Sprintf("%v at byte %d", syn, syn.Offset)
	case err.Error() == "unexpected EOF":
		return fmt.Sprintf("unexpected end of input after %d bytes; the JSON is truncated", len(s))
	default:
		return err.Error()
	}
}

func quoteArgs(s string) string {
	const n = 200
	if len(s) > n {
		return fmt.Sprintf("%q… (%d bytes)", s[:n], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// malformedKey wraps argument text that is not a JSON object where a
// transport or a provider needs an object (Anthropic's tool_use input). The
// guard unwraps it again, so callers see the original text.
const malformedKey = "__taskloom_unparsed_arguments__"

// wrapMalformed returns args unchanged when they are a JSON object, and an
// object holding args under malformedKey otherwise.
func wrapMalformed(args string) string {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return "{}"
	}
	if isJSONObject([]byte(trimmed)) {
		return args
	}
	b, _ := json.Marshal(map[string]string{malformedKey: args})
	return string(b)
}

// unwrapMalformed reverses wrapMalformed.
func unwrapMalformed(args string) string {
	if !strings.Contains(args, malformedKey) {
		return args
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(args), &m); err != nil || len(m) != 1 {
		return args
	}
	if raw, ok := m[malformedKey]; ok {
		return raw
	}
	return args
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// IsMaxTokens reports whether a stop reason says the reply was cut by the
// output limit (Anthropic's "max_tokens", OpenAI's "length"). The tool
// calls of such a reply are incomplete and must not be run.
func IsMaxTokens(stop string) bool {
	switch strings.ToLower(stop) {
	case "max_tokens", "length", "model_length":
		return true
	}
	return false
}
