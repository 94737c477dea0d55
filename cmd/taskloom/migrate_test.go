package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/migrations"

	_ "modernc.org/sqlite"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Execute(t.Context(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestMigratePostgresTwice(t *testing.T) {
	t.Parallel()
	dbURL := checkpointtest.NewEmptyPostgresSchema(t)

	code, out, errOut := runCLI(t, "migrate", "--db", dbURL)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	// The store's migrations, then River's, whose job tables hold the
	// attempts that workers on other machines take.
	require.Equal(t, "applied 001_init\napplied 002_attempt_leases\n"+
		"applied 001_river_create_river_migration\napplied 002_river_initial_schema\napplied 003_river_river_job_tags_non_null\n"+
		"applied 004_river_pending_and_more\napplied 005_river_migration_unique_client\napplied 006_river_bulk_unique\n"+
		"applied 007_river_notification_outbox_sqlite_jsonb_and_sql_cleanup\napplied 008_river_job_id_autoincrement\n"+
		"schema is up to date at version 2\n", out)

	code, out, errOut = runCLI(t, "migrate", "--db", dbURL)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Equal(t, "schema is up to date at version 2\n", out)
}

func TestMigrateSQLiteDefaultPath(t *testing.T) {
	repo := t.TempDir()
	testkit.Git(t, repo, "init", "-q")
	t.Chdir(repo)

	code, out, errOut := runCLI(t, "migrate")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Equal(t, "applied 001_init\napplied 002_attempt_leases\nschema is up to date at version 2\n", out)
	require.FileExists(t, filepath.Join(repo, ".taskloom", "taskloom.db"))

	code, out, errOut = runCLI(t, "migrate")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Equal(t, "schema is up to date at version 2\n", out)

	exclude, err := os.ReadFile(filepath.Join(repo, ".git", "info", "exclude"))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(exclude), "\n.taskloom/\n"), "added once:\n%s", exclude)
}

func TestMigrateSQLiteURL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "store.db")
	for i, want := range []string{
		"applied 001_init\napplied 002_attempt_leases\nschema is up to date at version 2\n",
		"schema is up to date at version 2\n",
	} {
		code, out, errOut := runCLI(t, "migrate", "--db", "sqlite://"+path)
		require.Equal(t, 0, code, "run %d: stderr: %s", i, errOut)
		require.Equal(t, want, out, "run %d", i)
	}
}

func TestMigrateUnreachableMasksPassword(t *testing.T) {
	t.Parallel()
	for _, dbURL := range []string{
		"postgres://postgres:s3cr3t-pw@127.0.0.1:1/test?sslmode=disable",
		// Without sslmode pgx tries twice and reports each attempt.
		"postgresql://postgres:s3cr3t-pw@127.0.0.1:1/test",
	} {
		code, out, errOut := runCLI(t, "migrate", "--db", dbURL)
		require.Equal(t, 1, code)
		require.Empty(t, out)
		require.NotContains(t, errOut, "s3cr3t-pw")
		require.Contains(t, errOut, "://postgres:xxxxx@127.0.0.1:1/test")
		require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
		require.True(t, strings.HasPrefix(errOut, "taskloom: "), errOut)
	}
}

func TestMigrateNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "store.db")
	code, _, errOut := runCLI(t, "migrate", "--db", path)
	require.Equal(t, 0, code, "stderr: %s", errOut)

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.ExecContext(context.Background(), `INSERT INTO `+migrations.VersionTable+` (version, name, applied_at) VALUES (7, 'from_the_future', 0)`)
	require.NoError(t, db.Close())
	require.NoError(t, err)

	code, out, errOut := runCLI(t, "migrate", "--db", path)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "database schema is at version 7, newer than this taskloom (2); upgrade taskloom")
	require.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
}

func TestMigrateMissingDirectory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "store.db")
	code, _, errOut := runCLI(t, "migrate", "--db", path)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "does not exist")
}

func TestMigrateDBFromEnvAndConfig(t *testing.T) {
	repo := t.TempDir()
	t.Chdir(repo)

	fromConfig := filepath.Join(repo, "from-config.db")
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".project-config.json"),
		[]byte(`{"database": {"url": "sqlite://`+fromConfig+`"}}`), 0o644))
	code, out, errOut := runCLI(t, "migrate")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "applied 001_init")
	require.FileExists(t, fromConfig)

	fromEnv := filepath.Join(repo, "from-env.db")
	t.Setenv("TASKLOOM_DB", fromEnv)
	code, out, errOut = runCLI(t, "migrate")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "applied 001_init")
	require.FileExists(t, fromEnv)
	require.NoDirExists(t, filepath.Join(repo, ".taskloom"))
}
