package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"

	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/store/storetest"
)

func TestWorkerNeedsThePostgresDatabase(t *testing.T) {
	t.Setenv("TASKLOOM_DB", "")
	repo := testkit.Repo(t, map[string]string{"README.md": "# r\n"})
	code, out, errOut := runCLI(t, "worker", "--repo", repo)
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Equal(t, "taskloom: taskloom worker needs the runs' PostgreSQL database: pass --db postgres://… (or set TASKLOOM_DB)\n", errOut)
	require.NoDirExists(t, filepath.Join(repo, ".taskloom"), "a worker never makes a store of its own")

	code, _, errOut = runCLI(t, "worker", "--repo", repo, "--db", "postgres://postgres@127.0.0.1:5432/test", "--concurrency", "0")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--concurrency must be at least 1")
}

// A worker pointed at a database that holds no taskloom store (a typo in
// --db, the app's own database) says so and leaves it as it was.
func TestWorkerMakesNoStoreInAnotherDatabase(t *testing.T) {
	repo := testkit.Repo(t, map[string]string{"README.md": "# r\n"})
	db := checkpointtest.NewEmptyPostgresSchema(t)
	code, out, errOut := runCLI(t, "worker", "--repo", repo, "--db", db)
	require.Equal(t, 1, code, errOut)
	require.Empty(t, out)
	require.Contains(t, errOut, "taskloom: no taskloom runs yet in postgres://")
	require.Contains(t, errOut, "start one with taskloom run PRODUCT.md --db URL")
	pool, err := pgxpool.New(context.Background(), db)
	require.NoError(t, err)
	defer pool.Close()
	var tables int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()").Scan(&tables))
	require.Zero(t, tables, "the worker made tables")
}

func TestRunWithoutWorkersNeedsTheQueue(t *testing.T) {
	repo := testkit.Repo(t, map[string]string{"PRODUCT.md": "# p\n",
		"script.json": `{"conversations": [{"match": "x", "replies": [{"content": "x"}]}]}`})
	code, _, errOut := runCLI(t, "run", filepath.Join(repo, "PRODUCT.md"), "--repo", repo, "--workers", "0",
		"--model", "scripted:"+filepath.Join(repo, "script.json"))
	require.Equal(t, 1, code)
	require.Equal(t, "taskloom: --workers 0 leaves every attempt to `taskloom worker` processes, which need a PostgreSQL store (--db postgres://…) and the git remote \"origin\" (worker.remote) in this repo\n", errOut)
	code, out, _ := runCLI(t, "runs", "--repo", repo)
	require.Equal(t, 0, code)
	require.NotContains(t, out, "interrupted", "the refused run left no record")
}

// A shallow clone cannot name its repository for the queue, so a run there
// does not hand its attempts to workers, which could be another
// repository's.
func TestShallowCloneKeepsItsAttempts(t *testing.T) {
	src := testkit.Repo(t, map[string]string{"PRODUCT.md": "# p\n",
		"script.json": `{"conversations": [{"match": "x", "replies": [{"content": "x"}]}]}`})
	testkit.Git(t, src, "commit", "-q", "--allow-empty", "-m", "second")
	shallow := filepath.Join(t.TempDir(), "shallow")
	testkit.Git(t, src, "clone", "-q", "--depth=1", "file://"+src, shallow)
	code, _, errOut := runCLI(t, "run", filepath.Join(shallow, "PRODUCT.md"), "--repo", shallow, "--workers", "0",
		"--db", storetest.NewPostgresSchema(t), "--model", "scripted:"+filepath.Join(shallow, "script.json"))
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "cannot tell this shallow clone's attempts from another repository's")
}
