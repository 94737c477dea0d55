package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Transient reports whether a pgx error says that the server or the
// connection went away, rather than that the statement is wrong: a retry
// on a new connection may succeed.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", // admin_shutdown
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now: starting up or shutting down
			"53300": // too_many_connections
			return true
		}
		// Class 08: connection exception.
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var connectErr *pgconn.ConnectError
	var opErr *net.OpError
	if errors.As(err, &connectErr) || errors.As(err, &opErr) {
		return true
	}
	for _, target := range []error{io.EOF, io.ErrUnexpectedEOF, net.ErrClosed, syscall.ECONNREFUSED, syscall.ECONNRESET,
		syscall.ECONNABORTED, syscall.EPIPE} {
		if errors.Is(err, target) {
			return true
		}
	}
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"the database system is starting up", "the database system is shutting down",
		"the database system is in recovery mode", "terminating connection due to administrator command",
		"conn closed", "connection refused", "connection reset", "broken pipe", "unexpected eof"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
