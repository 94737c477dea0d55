package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
)

// Script is a parsed scripted session.
type Script struct {
	Conversations []Conversation `json:"conversations"`
}

// Conversation is one scripted conversation: the replies played when the
// first user message of a request matches Match.
type Conversation struct {
	// Match is an RE2 regular expression matched against the text of the
	// first user message of a request.
	Match string `json:"match"`
	// Replies are played in order: reply i answers a request that already
	// holds i assistant messages.
	Replies []Reply `json:"replies"`
}

// Reply is one scripted model answer.
type Reply struct {
	Content   string             `json:"content"`
	ToolCalls []ScriptedToolCall `json:"tool_calls"`
	// DelayMS is a simulated latency in milliseconds.
	DelayMS int `json:"delay_ms"`
}

// ScriptedToolCall is a tool call in a scripted reply.
type ScriptedToolCall struct {
	Name string `json:"name"`
	// Arguments is either a JSON object, re-marshalled compactly into the
	// tool call's argument string, or a JSON string whose content is passed
	// through verbatim (it may be malformed JSON on purpose). When absent the
	// arguments are "{}".
	Arguments json.RawMessage `json:"arguments"`
}

// ErrInvalidScript is wrapped by every error ParseScript returns for a
// script that decodes but breaks a rule.
var ErrInvalidScript = errors.New("invalid script")

// ParseScript decodes and validates a script. Unknown keys are errors, every
// regex must compile, every conversation needs at least one reply, every
// reply needs content or tool calls, tool calls need a name, arguments must
// be an object or a string, and delays cannot be negative.
func ParseScript(data []byte) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode script: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode script: trailing data after the top-level object")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// LoadScript reads and parses the script file at path.
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load script: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("load script %s: %w", path, err)
	}
	return s, nil
}

// Validate checks the rules ParseScript enforces. Errors wrap
// ErrInvalidScript and name the offending conversation, reply and tool call
// by index.
func (s *Script) Validate() error {
	if len(s.Conversations) == 0 {
		return fmt.Errorf("%w: conversations: must have at least one conversation", ErrInvalidScript)
	}
	for i, c := range s.Conversations {
		if c.Match == "" {
			return fmt.Errorf("%w: conversations[%d].match: must not be empty (use \".*\" to match anything)", ErrInvalidScript, i)
		}
		if _, err := regexp.Compile(c.Match); err != nil {
			return fmt.Errorf("%w: conversations[%d].match: %w", ErrInvalidScript, i, err)
		}
		if len(c.Replies) == 0 {
			return fmt.Errorf("%w: conversations[%d].replies: must have at least one reply", ErrInvalidScript, i)
		}
		for j, r := range c.Replies {
			at := fmt.Sprintf("conversations[%d].replies[%d]", i, j)
			if r.Content == "" && len(r.ToolCalls) == 0 {
				return fmt.Errorf("%w: %s: needs content or tool_calls", ErrInvalidScript, at)
			}
			if r.DelayMS < 0 {
				return fmt.Errorf("%w: %s.delay_ms: must not be negative, got %d", ErrInvalidScript, at, r.DelayMS)
			}
			for k, tc := range r.ToolCalls {
				if tc.Name == "" {
					return fmt.Errorf("%w: %s.tool_calls[%d].name: must not be empty", ErrInvalidScript, at, k)
				}
				if _, err := tc.ArgumentString(); err != nil {
					return fmt.Errorf("%w: %s.tool_calls[%d].arguments: %w", ErrInvalidScript, at, k, err)
				}
			}
		}
	}
	return nil
}

// ArgumentString returns the argument string the scripted model sends for
// this call: the object compacted, or a raw string's content verbatim.
func (tc ScriptedToolCall) ArgumentString() (string, error) {
	raw := bytes.TrimSpace(tc.Arguments)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "{}", nil
	}
	switch raw[0] {
	case '{':
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return "", fmt.Errorf("compact object: %w", err)
		}
		return buf.String(), nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("decode string: %w", err)
		}
		return s, nil
	default:
		return "", fmt.Errorf("must be an object or a string, got %s", truncate(string(raw), 40))
	}
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
