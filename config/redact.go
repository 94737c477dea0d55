package config

import (
	"net/url"
	"regexp"
	"strings"
)

// mask replaces a secret in printable text.
const mask = "xxxxx"

var (
	queryPassword = regexp.MustCompile(`(?i)([?&](?:password|passwd|pwd|token|access_token|auth|auth_token|api_?key|key|secret|sig|signature)=)[^&#]*`)
	dsnPassword   = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
	urlInText     = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
)

// RedactURLs applies RedactURL to each URL in text: an error message that
// quotes the URL it was given, in whatever form.
func RedactURLs(text string) string {
	return urlInText.ReplaceAllStringFunc(text, RedactURL)
}

// URLSecrets returns the parts of a URL that RedactURL masks: the
// password of its user info and the values of its query parameters that
// name a password, token or key.
func URLSecrets(s string) []string {
	var out []string
	for _, m := range queryPassword.FindAllStringSubmatchIndex(s, -1) {
		if v := s[m[3]:m[1]]; v != "" {
			out = append(out, v)
		}
	}
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			out = append(out, p)
		}
	}
	return out
}

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
