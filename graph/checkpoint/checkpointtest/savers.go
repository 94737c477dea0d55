package checkpointtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/migrations"
)

// DefaultPostgresURL is the test database used when
// TASKLOOM_TEST_DATABASE_URL is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// NewSaverFunc returns a new, empty saver that lives until the test ends.
type NewSaverFunc func(t *testing.T) checkpoint.Saver

// SaverNames are the savers' names, in the order ForEachSaver runs them.
var SaverNames = []string{"memory", "sqlite", "postgres"}

// Savers returns a constructor of each saver, keyed by the names in
// SaverNames.
func Savers(tb testing.TB) map[string]NewSaverFunc {
	tb.Helper()
	return map[string]NewSaverFunc{
		"memory":   func(t *testing.T) checkpoint.Saver { return NewMemory(t) },
		"sqlite":   func(t *testing.T) checkpoint.Saver { return NewSQLite(t) },
		"postgres": func(t *testing.T) checkpoint.Saver { return NewPostgres(t) },
	}
}

// ForEachSaver runs fn in one subtest per saver, named memory, sqlite and
// postgres.
func ForEachSaver(t *testing.T, fn func(t *testing.T, newSaver NewSaverFunc)) {
	t.Helper()
	savers := Savers(t)
	for _, name := range SaverNames {
		t.Run(name, func(t *testing.T) { fn(t, savers[name]) })
	}
}

// NewMemory returns an in-memory saver.
func NewMemory(tb testing.TB) *checkpoint.Memory {
	tb.Helper()
	s := checkpoint.NewMemory()
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// NewSQLite returns a SQLite saver on a new database file in a temporary
// folder, closed when the test ends.
func NewSQLite(tb testing.TB) *checkpoint.SQLite {
	tb.Helper()
	s, err := checkpoint.NewSQLite(context.Background(), filepath.Join(tb.TempDir(), "taskloom.db"), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// NewPostgres returns a PostgreSQL saver in a new, migrated schema of its
// own (see NewPostgresSchema), closed when the test ends.
func NewPostgres(tb testing.TB) *checkpoint.Postgres {
	tb.Helper()
	dbURL := NewPostgresSchema(tb)
	s, err := checkpoint.OpenPostgres(context.Background(), dbURL, &checkpoint.PostgresOpts{SkipMigrate: true})
	require.NoError(tb, err)
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

// NewPostgresSchema creates a schema t_<random> in the test database,
// applies the migrations in it, drops it when the test ends, and returns a
// URL whose connections work in that schema (its search_path).
func NewPostgresSchema(tb testing.TB) string {
	tb.Helper()
	dbURL := NewEmptyPostgresSchema(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(tb, err)
	defer pool.Close()
	m, err := migrations.NewPostgres(pool, nil)
	require.NoError(tb, err)
	_, err = m.Migrate(ctx, migrations.Up, nil)
	require.NoError(tb, err)
	return dbURL
}

// NewEmptyPostgresSchema is NewPostgresSchema without the migrations.
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
