package checkpoint

import (
	"context"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// OpenOpts configures Open. Nil means defaults.
type OpenOpts struct {
	// Logger receives the migrations applied on open. Nil discards them.
	Logger *slog.Logger
	// SkipMigrate opens the database without applying migrations.
	SkipMigrate bool
	// SQLite holds the SQLite settings; its Logger and SkipMigrate are
	// overridden by the fields above.
	SQLite *SQLiteOpts
	// Retry says how a PostgreSQL saver rides out a server that stops
	// answering; its Logger defaults to Logger. Nil means defaults.
	Retry *RetryOpts
}

// Open opens the durable saver that dbURL names and applies the migrations:
// a postgres:// or postgresql:// URL opens a *Postgres; anything else is a
// SQLite database, given as a file path, sqlite://PATH, sqlite:PATH or
// file:PATH, and opens a *SQLite. Type-assert the result to reach DB or
// Pool. Errors name the URL with its password masked.
func Open(ctx context.Context, dbURL string, opts *OpenOpts) (Saver, error) {
	if opts == nil {
		opts = &OpenOpts{}
	}
	if IsPostgresURL(dbURL) {
		var ro RetryOpts
		if opts.Retry != nil {
			ro = *opts.Retry
		}
		if ro.Logger == nil {
			ro.Logger = opts.Logger
		}
		return OpenPostgres(ctx, dbURL, &PostgresOpts{Logger: opts.Logger, SkipMigrate: opts.SkipMigrate, Retry: &ro})
	}
	var so SQLiteOpts
	if opts.SQLite != nil {
		so = *opts.SQLite
	}
	so.Logger, so.SkipMigrate = opts.Logger, opts.SkipMigrate
	return NewSQLite(ctx, SQLitePath(dbURL), &so)
}

// IsPostgresURL reports whether dbURL names a PostgreSQL database.
func IsPostgresURL(dbURL string) bool {
	l := strings.ToLower(dbURL)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// SQLitePath returns the file path of a SQLite database URL: it strips a
// sqlite:// (so sqlite:///abs/path is /abs/path), sqlite: or file: prefix.
func SQLitePath(dbURL string) string {
	for _, p := range []string{"sqlite://", "sqlite:", "file://", "file:"} {
		if len(dbURL) >= len(p) && strings.EqualFold(dbURL[:len(p)], p) {
			return dbURL[len(p):]
		}
	}
	return dbURL
}

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

// maskErr returns err with every occurrence of dbURL's password masked in
// its text, and its text on one line (pgx lists each failed address on a
// line of its own).
func maskErr(err error, dbURL string) error {
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
