package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A worker pointed at a database that holds no taskloom store yet (one
// started before the first run, or given a mistyped --db) waits for a run
// to make it, says so once, and makes no tables there itself.
func TestWorkerWaitsForTheStore(t *testing.T) {
	repo := testkit.Repo(t, map[string]string{"README.md": "# r\n"})
	db := checkpointtest.NewEmptyPostgresSchema(t)
	ctx, cancel := context.WithCancel(t.Context())
	stop := time.AfterFunc(3*time.Second, cancel)
	defer stop.Stop()
	var out, errOut bytes.Buffer
	code := Execute(ctx, []string{"worker", "--repo", repo, "--db", db}, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 130, code, errOut.String())
	require.Equal(t, 1, strings.Count(errOut.String(), "waiting for a run to make one"), errOut.String())
	require.Contains(t, errOut.String(), "taskloom: no taskloom store in postgres://")
	require.Equal(t, "taskloom worker stopped before any run made the store\n", out.String())
	pool, err := pgxpool.New(context.Background(), db)
	require.NoError(t, err)
	defer pool.Close()
	var tables int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()").Scan(&tables))
	require.Zero(t, tables, "the worker made tables")
}

// Once a run (here, migrate) makes the store, the waiting worker goes on:
// to its next check, which this clone without a remote fails.
func TestWorkerGoesOnOnceTheStoreIsMade(t *testing.T) {
	repo := testkit.Repo(t, map[string]string{"README.md": "# r\n"})
	db := checkpointtest.NewEmptyPostgresSchema(t)
	made := make(chan int, 1)
	time.AfterFunc(time.Second, func() {
		code, _, _ := runCLI(t, "migrate", "--db", db)
		made <- code
	})
	code, _, errOut := runCLI(t, "worker", "--repo", repo, "--db", db)
	require.Equal(t, 0, <-made)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, "waiting for a run to make one")
	require.Contains(t, errOut, `has no git remote "origin"`)
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
