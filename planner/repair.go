package planner

import (
	"bytes"
	"encoding/json"
	"strings"
)

// ExtractJSON returns the JSON object in a model reply: the content of the
// first ``` code fence (all of it after an opening fence that is never
// closed), starting at its first '{', and without any text after a complete
// top-level value. A reply without '{' is returned trimmed.
func ExtractJSON(reply string) string {
	s := strings.TrimSpace(reply)
	if i := strings.Index(s, "```"); i >= 0 {
		rest := s[i+3:]
		// Skip the info string ("json") up to the end of the fence line.
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[nl+1:]
		} else {
			rest = ""
		}
		if j := strings.Index(rest, "```"); j >= 0 {
			rest = rest[:j]
		}
		s = strings.TrimSpace(rest)
	}
	if i := strings.IndexByte(s, '{'); i > 0 {
		s = s[i:]
	}
	// Drop prose after a complete value.
	dec := json.NewDecoder(strings.NewReader(s))
	var v json.RawMessage
	if err := dec.Decode(&v); err == nil {
		if off := int(dec.InputOffset()); off < len(s) && strings.TrimSpace(s[off:]) != "" {
			s = s[:off]
		}
	}
	return s
}

// Repair fixes JSON only where the fix is certain, and reports what it did:
//   - it removes // and /* */ comments outside strings;
//   - it removes a comma directly before a closing '}' or ']';
//   - it escapes raw newlines, carriage returns and tabs inside strings;
//   - when the text ends right after a complete object or array with
//     containers still open, it closes them.
//
// It never closes an unterminated string, never completes a value cut in
// the middle, and never guesses at a mismatched bracket. ok is true only if
// something was changed and the result is valid JSON; the caller still has
// to validate it as a plan.
func Repair(s string) (fixed string, changes []string, ok bool) {
	return repair(s, true)
}

// Container states while scanning.
const (
	stExpectKey   = iota // after '{' or ',' in an object
	stAfterKey           // after a key, expecting ':'
	stExpectValue        // after ':' in an object, or '[' / ',' in an array
	stAfterValue         // after a value
)

type container struct {
	open  byte
	state int
}

func repair(s string, allowClose bool) (string, []string, bool) {
	var out bytes.Buffer
	out.Grow(len(s) + 8)
	var stack []container
	changed := map[string]bool{}
	var order []string
	note := func(msg string) {
		if !changed[msg] {
			changed[msg] = true
			order = append(order, msg)
		}
	}
	// lastSig is the last significant byte written outside strings.
	var lastSig byte
	valueDone := func() {
		if n := len(stack); n > 0 {
			stack[n-1].state = stAfterValue
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			// Copy the string, escaping raw control characters.
			isKey := len(stack) > 0 && stack[len(stack)-1].open == '{' && stack[len(stack)-1].state == stExpectKey
			out.WriteByte('"')
			j := i + 1
			closed := false
			for ; j < len(s); j++ {
				d := s[j]
				if d == '\\' {
					if j+1 >= len(s) {
						break
					}
					out.WriteByte(d)
					out.WriteByte(s[j+1])
					j++
					continue
				}
				if d == '"' {
					closed = true
					break
				}
				switch d {
				case '\n':
					out.WriteString(`\n`)
					note("escaped raw control characters in strings")
				case '\r':
					out.WriteString(`\r`)
					note("escaped raw control characters in strings")
				case '\t':
					out.WriteString(`\t`)
					note("escaped raw control characters in strings")
				default:
					out.WriteByte(d)
				}
			}
			if !closed {
				return "", nil, false // an unterminated string is never certain
			}
			out.WriteByte('"')
			i = j
			lastSig = '"'
			if isKey {
				stack[len(stack)-1].state = stAfterKey
			} else {
				valueDone()
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '/':
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				i = len(s)
			} else {
				i += j - 1
			}
			note("removed comments")
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return "", nil, false
			}
			i += j + 3
			note("removed comments")
		case c == '{' || c == '[':
			out.WriteByte(c)
			st := stExpectKey
			if c == '[' {
				st = stExpectValue
			}
			stack = append(stack, container{open: c, state: st})
			lastSig = c
		case c == '}' || c == ']':
			if len(stack) == 0 {
				return "", nil, false
			}
			top := stack[len(stack)-1]
			if (c == '}') != (top.open == '{') {
				return "", nil, false // mismatched bracket: not certain
			}
			stack = stack[:len(stack)-1]
			out.WriteByte(c)
			lastSig = c
			valueDone()
		case c == ',':
			// A comma directly before a closer is dropped.
			j := skipSpaceAndComments(s, i+1)
			if j < len(s) && (s[j] == '}' || s[j] == ']') {
				note("removed trailing commas")
				continue
			}
			out.WriteByte(c)
			lastSig = c
			if n := len(stack); n > 0 {
				if stack[n-1].open == '{' {
					stack[n-1].state = stExpectKey
				} else {
					stack[n-1].state = stExpectValue
				}
			}
		case c == ':':
			out.WriteByte(c)
			lastSig = c
			if n := len(stack); n > 0 {
				stack[n-1].state = stExpectValue
			}
		case c == ' ' || c == '\n' || c == '\r' || c == '\t':
			out.WriteByte(c)
		default:
			// A literal (number, true, false, null) or garbage: copy it.
			j := i
			for j < len(s) && !strings.ContainsRune(" \n\r\t,:[]{}\"/", rune(s[j])) {
				j++
			}
			if j == i {
				j = i + 1
			}
			out.WriteString(s[i:j])
			i = j - 1
			lastSig = 'l'
			valueDone()
		}
	}
	if len(stack) > 0 {
		if !allowClose || (lastSig != '}' && lastSig != ']') {
			return "", nil, false
		}
		// The innermost container ends after a complete value; closing it
		// completes its parent's value, and so on outwards.
		for k := len(stack) - 1; k >= 0; k-- {
			if stack[k].open == '{' {
				out.WriteByte('}')
			} else {
				out.WriteByte(']')
			}
		}
		note("closed unbalanced brackets at the end")
	}
	if len(order) == 0 {
		return "", nil, false
	}
	res := out.String()
	if !json.Valid([]byte(res)) {
		return "", nil, false
	}
	return res, order, true
}

func skipSpaceAndComments(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t':
			i++
		case strings.HasPrefix(s[i:], "//"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return len(s)
			}
			i += j
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return len(s)
			}
			i += j + 4
		default:
			return i
		}
	}
	return i
}
