package checkpointtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

// DefaultPostgresURL is the test database used when
// TASKLOOM_TEST_DATABASE_URL is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// NewSaverFunc returns a new, empty saver that lives until the test ends.
type NewSaverFunc func(t *testing.T) checkpoint.Saver

// NewMemory returns an in-memory saver.
func NewMemory(tb testing.TB) *checkpoint.Memory {
	tb.Helper()
	s := checkpoint.NewMemory()
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

var reach struct {
	once sync.Once
	url  string
	err  error
}

// PostgresURL returns the test database's URL, from
// TASKLOOM_TEST_DATABASE_URL or DefaultPostgresURL. When no server answers
// there it skips the test, or fails it when CI=true.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	reach.once.Do(func() {
		reach.url = os.Getenv("TASKLOOM_TEST_DATABASE_URL")
		if reach.url == "" {
			reach.url = DefaultPostgresURL
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, reach.url)
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(ctx)
		}
		reach.err = err
	})
	if reach.err != nil {
		msg := "PostgreSQL is not reachable at %s (set TASKLOOM_TEST_DATABASE_URL): %v"
		if os.Getenv("CI") == "true" {
			tb.Fatalf(msg, checkpoint.MaskURL(reach.url), reach.err)
		}
		tb.Skipf(msg, checkpoint.MaskURL(reach.url), reach.err)
	}
	return reach.url
}

// NewEmptyPostgresSchema creates a schema t_<random> in the test database,
// drops it when the test ends, and returns a URL whose connections work in
// that schema (its search_path). It is empty: the drivers' test helpers
// (package storetest) migrate it.
func NewEmptyPostgresSchema(tb testing.TB) string {
	tb.Helper()
	base := PostgresURL(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, base)
	require.NoError(tb, err)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	_ = conn.Close(ctx)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})

	u, err := url.Parse(base)
	require.NoError(tb, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
