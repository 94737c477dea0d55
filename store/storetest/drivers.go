package storetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/migrations"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/sqlite"
)

// NewDriverFunc returns a new, empty driver that lives until the test ends.
type NewDriverFunc func(t *testing.T) store.Driver

// DriverNames are the drivers' names, in the order ForEachDriver runs them.
var DriverNames = []string{"memory", "sqlite", "postgres"}

// New returns a new, empty driver named by one of DriverNames, closed when
// the test ends.
func New(tb testing.TB, name string) store.Driver {
	tb.Helper()
	switch name {
	case "memory":
		return NewMemory(tb)
	case "sqlite":
		return NewSQLite(tb)
	case "postgres":
		return NewPostgres(tb)
	}
	tb.Fatalf("storetest: no driver %q (want one of %v)", name, DriverNames)
	return nil
}

// ForEachDriver runs fn in one subtest per driver, named memory, sqlite and
// postgres.
func ForEachDriver(t *testing.T, fn func(t *testing.T, newDriver NewDriverFunc)) {
	t.Helper()
	for _, name := range DriverNames {
		t.Run(name, func(t *testing.T) {
			fn(t, func(t *testing.T) store.Driver { return New(t, name) })
		})
	}
}

// RunConformance runs the checkpoint saver suite and the records suite on
// new drivers named name (one of DriverNames): what every driver behind
// the seam must pass. A driver that can hold a queue of attempts
// (store.Queue) passes the queue suite too.
func RunConformance(t *testing.T, name string) {
	t.Helper()
	t.Run("saver", func(t *testing.T) {
		t.Parallel()
		checkpointtest.Run(t, func(t *testing.T) checkpoint.Saver { return New(t, name) })
	})
	t.Run("records", func(t *testing.T) {
		t.Parallel()
		RunRecords(t, func(t *testing.T) store.Records { return New(t, name) })
	})
	if _, ok := New(t, name).(store.Queue); ok {
		t.Run("queue", func(t *testing.T) {
			t.Parallel()
			RunQueue(t, func(t *testing.T) store.Queue { return New(t, name).(store.Queue) })
		})
	}
}

// ForEachSaver is ForEachDriver for tests that need only the drivers'
// checkpoint savers.
func ForEachSaver(t *testing.T, fn func(t *testing.T, newSaver checkpointtest.NewSaverFunc)) {
	t.Helper()
	ForEachDriver(t, func(t *testing.T, newDriver NewDriverFunc) {
		fn(t, func(t *testing.T) checkpoint.Saver { return newDriver(t) })
	})
}

// NewMemory returns an in-memory driver.
func NewMemory(tb testing.TB) *store.Memory {
	tb.Helper()
	d := store.NewMemory()
	tb.Cleanup(func() { _ = d.Close() })
	return d
}

// NewSQLite returns a SQLite driver on a new database file in a temporary
// folder, closed when the test ends.
func NewSQLite(tb testing.TB) *sqlite.Driver {
	tb.Helper()
	d, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "taskloom.db"), nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = d.Close() })
	return d
}

// NewPostgres returns a PostgreSQL driver in a new, migrated schema of its
// own (see NewPostgresSchema), closed when the test ends.
func NewPostgres(tb testing.TB) *postgres.Driver {
	tb.Helper()
	dbURL := NewPostgresSchema(tb)
	d, err := postgres.Open(context.Background(), dbURL, &postgres.Opts{SkipMigrate: true})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = d.Close() })
	return d
}

// NewPostgresSchema creates a schema t_<random> in the test database
// (checkpointtest.NewEmptyPostgresSchema), applies the PostgreSQL driver's
// migrations in it, and returns a URL whose connections work in that
// schema. The schema is dropped when the test ends.
func NewPostgresSchema(tb testing.TB) string {
	tb.Helper()
	dbURL := checkpointtest.NewEmptyPostgresSchema(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(tb, err)
	defer pool.Close()
	m, err := postgres.NewMigrator(pool, nil)
	require.NoError(tb, err)
	_, err = m.Migrate(ctx, migrations.Up, nil)
	require.NoError(tb, err)
	return dbURL
}
