package checkpoint

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

const masked = "xxxxx"

var passwordKV = regexp.MustCompile(`(?i)(password=)('[^']*'|[^\s&]+)`)

// MaskURL returns dbURL with its password, if any, replaced by "xxxxx", so
// that it can be shown in errors and logs.
func MaskURL(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return passwordKV.ReplaceAllString(dbURL, "${1}"+masked)
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), masked)
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", masked)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// passwordOf returns the password in dbURL, or "".
func passwordOf(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			return pw
		}
	}
	if err == nil {
		if pw := u.Query().Get("password"); pw != "" {
			return pw
		}
	}
	if m := passwordKV.FindStringSubmatch(dbURL); m != nil {
		return strings.Trim(m[2], "'")
	}
	return ""
}

// maskedError hides a password that a driver's error text repeats.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

// MaskError returns err with every occurrence of dbURL's password masked
// in its text, and its text on one line (a driver may list each failed
// address on a line of its own). It still unwraps to err.
func MaskError(err error, dbURL string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if pw := passwordOf(dbURL); pw != "" {
		msg = strings.ReplaceAll(msg, pw, masked)
	}
	if strings.Contains(msg, "\n") {
		var parts []string
		for _, line := range strings.Split(msg, "\n") {
			line = strings.TrimSpace(line)
			if line != "" && !slices.Contains(parts, line) {
				parts = append(parts, line)
			}
		}
		msg = strings.Join(parts, " ")
	}
	if msg == err.Error() {
		return err
	}
	return &maskedError{msg: msg, err: err}
}
