// Package clip shortens text for a log line, a summary or an event
// without splitting a character: byte slicing can cut a multi-byte rune
// in half and leave invalid UTF-8 on a terminal or in JSON.
package clip

import (
	"strings"
	"unicode/utf8"
)

// Line returns s as one line of at most n runes (no limit when n <= 0):
// its first non-empty line, trimmed. A first line that only introduces
// what follows (it ends with ":", as in "its stderr ends:") gets the last
// non-empty line appended, since that is where a tool's output says what
// went wrong.
func Line(s string, n int) string {
	s = strings.TrimSpace(s)
	line, rest, _ := strings.Cut(s, "\n")
	line = strings.TrimSpace(line)
	if strings.HasSuffix(line, ":") {
		if last := lastLine(rest); last != "" {
			line += " " + last
		}
	}
	return Head(line, n)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// Head returns s cut to at most n runes, ending with "…" when cut (no
// limit when n <= 0).
func Head(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for k := 0; k < n; k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i] + "…"
}

// Tail returns about the last n bytes of s, starting on a rune boundary,
// with "…" in front when cut.
func Tail(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return "…" + s[i:]
}
