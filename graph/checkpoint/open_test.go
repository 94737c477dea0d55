package checkpoint_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/migrations"
)

func TestMaskURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://u:secret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgresql://u@h/db", "postgresql://u@h/db"},
		{"postgres://h/db?password=secret&sslmode=disable", "postgres://h/db?password=xxxxx&sslmode=disable"},
		{"host=h user=u password=secret dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"/var/lib/taskloom.db", "/var/lib/taskloom.db"},
		{"", ""},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, checkpoint.MaskURL(tc.in), "MaskURL(%q)", tc.in)
	}
}

func TestSQLitePath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"sqlite:///abs/x.db": "/abs/x.db",
		"sqlite://rel/x.db":  "rel/x.db",
		"SQLite:x.db":        "x.db",
		"file:/abs/x.db":     "/abs/x.db",
		"/abs/x.db":          "/abs/x.db",
		"x.db":               "x.db",
	} {
		require.Equal(t, want, checkpoint.SQLitePath(in), in)
	}
	require.True(t, checkpoint.IsPostgresURL("postgres://h/db"))
	require.True(t, checkpoint.IsPostgresURL("PostgreSQL://h/db"))
	require.False(t, checkpoint.IsPostgresURL("/tmp/postgres.db"))
}

func TestOpenSQLite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	for _, u := range []string{path, "sqlite://" + path, "file:" + path} {
		s, err := checkpoint.Open(ctx, u, nil)
		require.NoError(t, err, u)
		lite, ok := s.(*checkpoint.SQLite)
		require.True(t, ok, "%s opens a *SQLite, got %T", u, s)
		require.Equal(t, path, lite.Path())
		require.NoError(t, s.Close())
	}
}

func TestOpenPostgres(t *testing.T) {
	t.Parallel()
	dbURL := checkpointtest.NewEmptyPostgresSchema(t)
	s, err := checkpoint.Open(t.Context(), dbURL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	pg, ok := s.(*checkpoint.Postgres)
	require.True(t, ok, "got %T", s)
	v, err := pg.Migrator().Version(t.Context())
	require.NoError(t, err)
	require.Equal(t, pg.Migrator().Latest(), v, "Open applies the migrations")

	// Other records live in the same database.
	_, err = pg.Pool().Exec(t.Context(), `INSERT INTO runs (id, product_path, repo, status, created_at, updated_at)
		VALUES ('r1', 'PRODUCT.md', '/repo', 'running', now(), now())`)
	require.NoError(t, err)
}

func TestOpenUnreachableMasksPassword(t *testing.T) {
	t.Parallel()
	_, err := checkpoint.Open(t.Context(), "postgres://u:hunter2@127.0.0.1:1/db?sslmode=disable&connect_timeout=5", nil)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
	require.Contains(t, err.Error(), "postgres://u:xxxxx@127.0.0.1:1/db")
	require.NotContains(t, err.Error(), "\n")
}

func TestSQLiteReopenKeepsData(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := checkpoint.NewSQLite(ctx, path, &checkpoint.SQLiteOpts{Synchronous: "FULL"})
	require.NoError(t, err)
	var mode, sync string
	require.NoError(t, s.DB().QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
	require.NoError(t, s.DB().QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
	require.Equal(t, "wal", mode)
	require.Equal(t, "2", sync, "FULL")
	l, err := s.Acquire(ctx, "t", "a", checkpointtest.T0, time.Minute)
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, l, checkpointtest.Step("t", 0)))
	require.NoError(t, s.PutWrites(ctx, l, []checkpoint.Write{{Step: 1, TaskID: "x", Kind: checkpoint.WriteUpdate, Payload: []byte("p")}}))
	require.NoError(t, s.Close())

	s, err = checkpoint.NewSQLite(ctx, path, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.DB().QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
	require.Equal(t, "1", sync, "NORMAL by default")
	ld, err := s.Load(ctx, "t", -1)
	require.NoError(t, err)
	require.Equal(t, int64(0), ld.Head)
	require.Len(t, ld.Writes, 1)
	// The lease survives the reopen: its holder can go on writing.
	require.NoError(t, s.Put(ctx, l, checkpointtest.Step("t", 1)))
	_, err = s.Acquire(ctx, "t", "b", checkpointtest.T0, time.Minute)
	require.ErrorIs(t, err, checkpoint.ErrThreadBusy)
}

func TestSQLiteOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := checkpoint.NewSQLite(ctx, path, nil)
	require.NoError(t, err)
	_, err = s.DB().ExecContext(ctx, `INSERT INTO `+migrations.VersionTable+` (version, name, applied_at) VALUES (99, 'future', 0)`)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = checkpoint.NewSQLite(ctx, path, nil)
	require.ErrorIs(t, err, migrations.ErrNewerSchema)
	require.ErrorContains(t, err, "database schema is at version 99, newer than this taskloom")
}

func TestSQLiteOptsValidation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, err := checkpoint.NewSQLite(ctx, filepath.Join(t.TempDir(), "x.db"), &checkpoint.SQLiteOpts{Synchronous: "OFF"})
	require.ErrorContains(t, err, "synchronous must be NORMAL or FULL")
	_, err = checkpoint.NewSQLite(ctx, filepath.Join(t.TempDir(), "missing", "x.db"), nil)
	require.ErrorContains(t, err, "does not exist")
	s, err := checkpoint.NewSQLite(ctx, ":memory:", nil)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	var db *sql.DB = s.ReadDB()
	require.Same(t, s.DB(), db, "an in-memory database has one connection")
}
