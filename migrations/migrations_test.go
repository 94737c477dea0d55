package migrations_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/migrations"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/sqlite"
)

func TestParse(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name    string
		fs      fstest.MapFS
		wantErr string
		want    []string
	}{
		{name: "ok", fs: fstest.MapFS{
			"001_init.up.sql": file("up1"), "001_init.down.sql": file("down1"),
			"002_add_x.up.sql": file("up2"), "002_add_x.down.sql": file("down2"),
			"README.md": file("not a migration"),
		}, want: []string{"001_init", "002_add_x"}},
		{name: "empty", fs: fstest.MapFS{}, want: []string{}},
		{name: "gap", fs: fstest.MapFS{
			"001_init.up.sql": file(""), "001_init.down.sql": file(""),
			"003_c.up.sql": file(""), "003_c.down.sql": file(""),
		}, wantErr: "gap: 002 is missing"},
		{name: "duplicate version", fs: fstest.MapFS{
			"001_init.up.sql": file(""), "001_init.down.sql": file(""),
			"001_other.up.sql": file(""), "001_other.down.sql": file(""),
		}, wantErr: "duplicate migration version 001"},
		{name: "missing down", fs: fstest.MapFS{
			"001_init.up.sql": file(""),
		}, wantErr: "001_init is missing its down half"},
		{name: "missing up", fs: fstest.MapFS{
			"001_init.down.sql": file(""),
		}, wantErr: "001_init is missing its up half"},
		{name: "bad name", fs: fstest.MapFS{
			"1_init.up.sql": file(""),
		}, wantErr: "name must be NNN_snake_name"},
		{name: "version zero", fs: fstest.MapFS{
			"000_init.up.sql": file(""), "000_init.down.sql": file(""),
		}, wantErr: "versions start at 001"},
		{name: "concurrently", fs: fstest.MapFS{
			"001_init.up.sql": file("CREATE INDEX CONCURRENTLY i ON t (x)"), "001_init.down.sql": file(""),
		}, wantErr: "CONCURRENTLY"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := migrations.Parse(tc.fs)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			ids := []string{}
			for _, m := range got {
				ids = append(ids, m.ID())
			}
			require.Equal(t, tc.want, ids)
		})
	}
}

// logLines returns a logger writing JSON lines to buf and a function that
// decodes them.
func logLines(t *testing.T) (*slog.Logger, func() []map[string]any) {
	var buf bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})
	return slog.New(slog.NewJSONHandler(w, nil)), func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if line == "" {
				continue
			}
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			out = append(out, m)
		}
		return out
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// dialect is what the shared tests need of one database.
type dialect struct {
	newMigrator func(t *testing.T, opts *migrations.Opts) *migrations.Migrator
	tableExists func(t *testing.T, name string) bool
	exec        func(t *testing.T, sql string)
	// now is the SQL for the current time in the version table.
	now string
}

func postgresDialect(t *testing.T) dialect {
	dbURL := checkpointtest.NewEmptyPostgresSchema(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return dialect{
		newMigrator: func(t *testing.T, opts *migrations.Opts) *migrations.Migrator {
			// Each migrator gets its own pool, as another process would.
			p, err := pgxpool.New(context.Background(), dbURL)
			require.NoError(t, err)
			t.Cleanup(p.Close)
			m, err := postgres.NewMigrator(p, opts)
			require.NoError(t, err)
			return m
		},
		tableExists: func(t *testing.T, name string) bool {
			var ok bool
			require.NoError(t, pool.QueryRow(t.Context(), `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok))
			return ok
		},
		exec: func(t *testing.T, sql string) {
			_, err := pool.Exec(t.Context(), sql)
			require.NoError(t, err)
		},
		now: "now()",
	}
}

func sqliteDialect(t *testing.T) dialect {
	path := filepath.Join(t.TempDir(), "m.db")
	open := func(t *testing.T) *sql.DB {
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)")
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	db := open(t)
	return dialect{
		newMigrator: func(t *testing.T, opts *migrations.Opts) *migrations.Migrator {
			m, err := sqlite.NewMigrator(open(t), opts)
			require.NoError(t, err)
			return m
		},
		tableExists: func(t *testing.T, name string) bool {
			var n int
			require.NoError(t, db.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n))
			return n == 1
		},
		exec: func(t *testing.T, sql string) {
			_, err := db.ExecContext(t.Context(), sql)
			require.NoError(t, err)
		},
		now: "0",
	}
}

func forEachDialect(t *testing.T, fn func(t *testing.T, d dialect)) {
	t.Run("postgres", func(t *testing.T) { t.Parallel(); fn(t, postgresDialect(t)) })
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); fn(t, sqliteDialect(t)) })
}

func TestMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		logger, logs := logLines(t)
		m := d.newMigrator(t, &migrations.Opts{Logger: logger})
		v, err := m.Version(ctx)
		require.NoError(t, err)
		require.Equal(t, 0, v)

		res, err := m.Migrate(ctx, migrations.Up, nil)
		require.NoError(t, err)
		require.Equal(t, m.Latest(), res.Version)
		require.Len(t, res.Versions, m.Latest())
		require.Equal(t, "001_init", res.Versions[0].ID())
		for _, table := range []string{"threads", "checkpoints", "writes", "runs", "agent_histories"} {
			require.True(t, d.tableExists(t, table), table)
		}
		lines := logs()
		require.Len(t, lines, m.Latest())
		require.Equal(t, "migration applied", lines[0]["msg"])
		require.EqualValues(t, 1, lines[0]["version"])
		require.Equal(t, "up", lines[0]["direction"])
		require.Contains(t, lines[0], "duration")

		// Again: nothing to do.
		res, err = m.Migrate(ctx, migrations.Up, nil)
		require.NoError(t, err)
		require.Empty(t, res.Versions)
		require.Equal(t, m.Latest(), res.Version)
		require.Len(t, logs(), m.Latest())

		res, err = m.Migrate(ctx, migrations.Down, &migrations.MigrateOpts{TargetVersion: -1})
		require.NoError(t, err)
		require.Equal(t, 0, res.Version)
		require.Len(t, res.Versions, m.Latest())
		require.False(t, d.tableExists(t, "threads"))
		require.Equal(t, "down", logs()[m.Latest()]["direction"])

		res, err = m.Migrate(ctx, migrations.Up, nil)
		require.NoError(t, err)
		require.Len(t, res.Versions, m.Latest())
		require.True(t, d.tableExists(t, "threads"))
	})
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, d dialect) {
		m := d.newMigrator(t, nil)
		_, err := m.Migrate(t.Context(), migrations.Up, nil)
		require.NoError(t, err)
		d.exec(t, `INSERT INTO taskloom_migration (version, name, applied_at) VALUES (42, 'future', `+d.now+`)`)
		_, err = m.Migrate(t.Context(), migrations.Up, nil)
		require.ErrorIs(t, err, migrations.ErrNewerSchema)
		var ne *migrations.NewerSchemaError
		require.ErrorAs(t, err, &ne)
		require.Equal(t, 42, ne.Version)
		require.EqualError(t, err, "database schema is at version 42, newer than this taskloom (2); upgrade taskloom")
	})
}

func TestFailedMigrationLeavesNothing(t *testing.T) {
	t.Parallel()
	set := []migrations.Migration{
		{Version: 1, Name: "one", Up: "CREATE TABLE one (id integer)", Down: "DROP TABLE one"},
		{Version: 2, Name: "two", Up: "CREATE TABLE two (id integer); SELECT * FROM no_such_table", Down: "DROP TABLE two"},
	}
	forEachDialect(t, func(t *testing.T, d dialect) {
		m := d.newMigrator(t, &migrations.Opts{Migrations: set})
		res, err := m.Migrate(t.Context(), migrations.Up, nil)
		require.ErrorContains(t, err, "apply migration 002_two (up)")
		require.Equal(t, 1, res.Version)
		v, err := m.Version(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, v)
		require.True(t, d.tableExists(t, "one"))
		require.False(t, d.tableExists(t, "two"), "the failed migration's first statement was rolled back")
	})
}

func TestConcurrentMigrators(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, d dialect) {
		const n = 4
		ms := make([]*migrations.Migrator, n)
		for i := range ms {
			ms[i] = d.newMigrator(t, nil)
		}
		var wg sync.WaitGroup
		results := make([]*migrations.Result, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = ms[i].Migrate(context.Background(), migrations.Up, nil)
			}()
		}
		close(start)
		wg.Wait()
		applied := 0
		for i := range n {
			require.NoError(t, errs[i], "migrator %d", i)
			require.Equal(t, ms[i].Latest(), results[i].Version)
			applied += len(results[i].Versions)
		}
		require.Equal(t, ms[0].Latest(), applied, "each migration ran once")
	})
}

func TestMigratePartway(t *testing.T) {
	t.Parallel()
	set := []migrations.Migration{
		{Version: 1, Name: "one", Up: "CREATE TABLE one (id integer)", Down: "DROP TABLE one"},
		{Version: 2, Name: "two", Up: "CREATE TABLE two (id integer)", Down: "DROP TABLE two"},
		{Version: 3, Name: "three", Up: "CREATE TABLE three (id integer)", Down: "DROP TABLE three"},
	}
	forEachDialect(t, func(t *testing.T, d dialect) {
		ctx := t.Context()
		m := d.newMigrator(t, &migrations.Opts{Migrations: set})
		res, err := m.Migrate(ctx, migrations.Up, &migrations.MigrateOpts{TargetVersion: 2})
		require.NoError(t, err)
		require.Equal(t, 2, res.Version)
		require.False(t, d.tableExists(t, "three"))
		res, err = m.Migrate(ctx, migrations.Up, &migrations.MigrateOpts{MaxSteps: 1})
		require.NoError(t, err)
		require.Equal(t, 3, res.Version)
		res, err = m.Migrate(ctx, migrations.Down, nil)
		require.NoError(t, err)
		require.Equal(t, 2, res.Version, "down defaults to one step")
		require.False(t, d.tableExists(t, "three"))
		require.True(t, d.tableExists(t, "two"))
		_, err = m.Migrate(ctx, migrations.Up, &migrations.MigrateOpts{TargetVersion: 9})
		require.ErrorContains(t, err, "target version 9")
	})
}

func TestNewMigratorRefusesGaps(t *testing.T) {
	t.Parallel()
	_, err := migrations.New(nil, nil, &migrations.Opts{Migrations: []migrations.Migration{{Version: 2, Name: "two"}}})
	require.ErrorContains(t, err, "without gaps")
}
