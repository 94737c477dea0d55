package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/testkit"
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
