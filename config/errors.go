package config

import (
	"fmt"
	"strings"
)

// KeyError is a bad value for one key: a wrong type or a broken rule.
type KeyError struct {
	// Key is the dotted key, with list indexes: "agent.custom_modes[1].slug".
	Key string
	// Rule says what is wrong: "must be between 0 and 13, got 20".
	Rule string
	// Source is where the value came from when Load knows it: a config
	// file, an environment variable or a "--flag". Empty for defaults and
	// for Validate.
	Source string
	// Err is the underlying error, if any.
	Err error
}

func (e *KeyError) Error() string {
	msg := e.Key + ": " + e.Rule
	if e.Source != "" {
		msg += " (from " + e.Source + ")"
	}
	return msg
}

func (e *KeyError) Unwrap() error { return e.Err }

// UnknownKeyError is a key in a config file that taskloom does not know.
type UnknownKeyError struct {
	// Key is the dotted key, with list indexes.
	Key string
	// File is the config file.
	File string
	// Suggestion is the closest known key, or empty.
	Suggestion string
	// Credential is set when the key looks like an API key or another
	// secret, which never belongs in the config.
	Credential bool
}

func (e *UnknownKeyError) Error() string {
	msg := fmt.Sprintf("unknown key %q in %s", e.Key, e.File)
	switch {
	case e.Credential:
		msg += ": secrets never go in the config file; API keys come from the environment " +
			"(ANTHROPIC_API_KEY, OPENAI_API_KEY or the provider's usual variable; LINEAR_API_KEY " +
			"for Linear) and a database password goes in database.url or TASKLOOM_DB"
	case e.Suggestion != "":
		msg += " (did you mean " + e.Suggestion + "?)"
	}
	return msg
}

// SyntaxError is malformed JSON in a config file.
type SyntaxError struct {
	File   string
	Line   int // 1-based
	Column int // 1-based, in bytes
	Err    error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s:%d:%d: malformed JSON: %v", e.File, e.Line, e.Column, e.Err)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// ValidationError gathers every problem found in a config, each a
// *KeyError or an *UnknownKeyError. It prints them on one line.
type ValidationError struct {
	Problems []error
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap lets errors.As find each problem.
func (e *ValidationError) Unwrap() []error { return e.Problems }

// problems collects the problems of one check.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, &KeyError{Key: key, Rule: fmt.Sprintf(format, args...)})
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return &ValidationError{Problems: p}
}
