package config

import (
	"regexp"
	"strings"
)

// mask replaces a secret in printable text.
const mask = "xxxxx"

var (
	queryPassword = regexp.MustCompile(`(?i)([?&](?:password|passwd|token|access_token|api_?key|key|secret)=)[^&#]*`)
	dsnPassword   = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
)

// RedactURL masks the password of a URL or key=value DSN, and the values
// of query parameters that name a password, token or key, so it can be
// printed: "postgres://u:secret@h/db" becomes "postgres://u:xxxxx@h/db".
// Text without a password is returned unchanged.
func RedactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return dsnPassword.ReplaceAllString(s, "${1}"+mask)
	}
	// The user info ends at the last "@" before the query or fragment, so a
	// password holding an unescaped "/" or "@" is still masked whole.
	head, tail := rest, ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		head, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndex(head, "@"); at >= 0 {
		if user, _, hasPass := strings.Cut(head[:at], ":"); hasPass {
			head = user + ":" + mask + head[at:]
		}
	}
	return scheme + "://" + head + queryPassword.ReplaceAllString(tail, "${1}"+mask)
}
