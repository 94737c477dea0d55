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

// workerClone is a clone of a repo with an origin remote, as a worker
// needs.
func workerClone(t *testing.T) string {
	repo := testkit.Repo(t, map[string]string{"README.md": "# r\n"})
	bare := filepath.Join(t.TempDir(), "origin.git")
	testkit.Git(t, repo, "clone", "-q", "--bare", repo, bare)
	testkit.Git(t, repo, "remote", "add", "origin", bare)
	return repo
}

// A worker pointed at a database that holds no taskloom store yet (one
// started before the first run, or given a mistyped --db) waits for a run
// to make it, says so once, and makes no tables there itself. Once a run
// (here, migrate) makes the store, it takes attempts.
func TestWorkerWaitsForTheStore(t *testing.T) {
	repo := workerClone(t)
	db := checkpointtest.NewEmptyPostgresSchema(t)
	ctx, cancel := context.WithCancel(t.Context())
	stop := time.AfterFunc(2*time.Second, func() {
		pool, err := pgxpool.New(context.Background(), db)
		if err == nil {
			var tables int
			_ = pool.QueryRow(context.Background(), "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()").Scan(&tables)
			pool.Close()
			if tables != 0 {
				t.Errorf("the waiting worker made %d tables", tables)
			}
		}
		code, _, errOut := runCLI(t, "migrate", "--db", db)
		if code != 0 {
			t.Errorf("migrate: %s", errOut)
		}
		time.AfterFunc(2*time.Second, cancel)
	})
	defer stop.Stop()
	var out, errOut bytes.Buffer
	code := Execute(ctx, []string{"worker", "--repo", repo, "--db", db}, strings.NewReader(""), &out, &errOut)
	require.Equal(t, 130, code, errOut.String())
	require.Equal(t, 1, strings.Count(errOut.String(), "waiting for a run to make one"), errOut.String())
	require.Contains(t, errOut.String(), "taskloom: no taskloom store in postgres://")
	require.Contains(t, out.String(), ": taking attempts (1 at a time) until stopped\n")
}

// A clone that cannot serve a worker is refused at once, before it waits
// for a store.
func TestWorkerCloneRefusedAtOnce(t *testing.T) {
	db := checkpointtest.NewEmptyPostgresSchema(t)
	noRemote := testkit.Repo(t, map[string]string{"README.md": "# r\n"})
	code, _, errOut := runCLI(t, "worker", "--repo", noRemote, "--db", db)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, `has no git remote "origin"`)
	gone := workerClone(t)
	testkit.Git(t, gone, "remote", "set-url", "origin", filepath.Join(t.TempDir(), "nowhere.git"))
	code, _, errOut = runCLI(t, "worker", "--repo", gone, "--db", db)
	require.Equal(t, 1, code, errOut)
	require.Contains(t, errOut, `cannot reach the git remote "origin"`)
	require.NotContains(t, errOut, "waiting")
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
