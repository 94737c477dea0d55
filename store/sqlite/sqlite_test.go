package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/migrations"
	"github.com/taskloom/taskloom/store/sqlite"
	"github.com/taskloom/taskloom/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.RunConformance(t, "sqlite")
}

func TestPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"sqlite:///abs/x.db": "/abs/x.db",
		"sqlite://rel/x.db":  "rel/x.db",
		"SQLite:x.db":        "x.db",
		"file:/abs/x.db":     "/abs/x.db",
		"/abs/x.db":          "/abs/x.db",
		"x.db":               "x.db",
	} {
		require.Equal(t, want, sqlite.Path(in), in)
	}
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := sqlite.Open(ctx, path, &sqlite.Opts{Synchronous: "FULL"})
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

	s, err = sqlite.Open(ctx, path, nil)
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

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := sqlite.Open(ctx, path, nil)
	require.NoError(t, err)
	_, err = s.DB().ExecContext(ctx, `INSERT INTO `+migrations.VersionTable+` (version, name, applied_at) VALUES (99, 'future', 0)`)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = sqlite.Open(ctx, path, nil)
	require.ErrorIs(t, err, migrations.ErrNewerSchema)
	require.ErrorContains(t, err, "database schema is at version 99, newer than this taskloom")
}

func TestOptsValidation(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "x.db"), &sqlite.Opts{Synchronous: "OFF"})
	require.ErrorContains(t, err, "synchronous must be NORMAL or FULL")
	_, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "missing", "x.db"), nil)
	require.ErrorContains(t, err, "does not exist")
	s, err := sqlite.Open(ctx, ":memory:", nil)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	var db *sql.DB = s.ReadDB()
	require.Same(t, s.DB(), db, "an in-memory database has one connection")
}

// A SQLite file deleted, or replaced by another file, under an open saver
// fails the next write with an error naming the file.
func TestFileReplaced(t *testing.T) {
	t.Parallel()
	for _, replace := range []bool{false, true} {
		t.Run(map[bool]string{false: "deleted", true: "replaced"}[replace], func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "taskloom.db")
			s, err := sqlite.Open(t.Context(), path, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			ctx := t.Context()
			lease, err := s.Acquire(ctx, "f", "a", time.Time{}, time.Hour)
			require.NoError(t, err)
			cp := checkpointtest.Step("f", 0)
			cp.Snapshot = []byte(`{}`)
			require.NoError(t, s.Put(ctx, lease, cp))

			require.NoError(t, os.Remove(path))
			if replace {
				other := filepath.Join(t.TempDir(), "other.db")
				o, err := sqlite.Open(ctx, other, nil)
				require.NoError(t, err)
				require.NoError(t, o.Close())
				require.NoError(t, os.Rename(other, path))
			}
			err = s.Put(ctx, lease, checkpointtest.Step("f", 1))
			require.ErrorIs(t, err, checkpoint.ErrStoreReplaced)
			require.Contains(t, err.Error(), path)
			var re *checkpoint.ReplacedError
			require.ErrorAs(t, err, &re)
			require.Equal(t, !replace, re.Deleted)
			require.ErrorIs(t, s.PutWrites(ctx, lease, nil), checkpoint.ErrStoreReplaced)
		})
	}
}
