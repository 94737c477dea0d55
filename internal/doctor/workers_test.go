package doctor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
)

func TestWorkersCheck(t *testing.T) {
	db := checkpointtest.PostgresURL(t)
	dir := t.TempDir()
	repo, remote := filepath.Join(dir, "repo"), filepath.Join(dir, "remote.git")
	for _, args := range [][]string{{"init", "-q", "-b", "main", repo}, {"init", "-q", "--bare", remote}} {
		require.NoError(t, exec.Command("git", args...).Run())
	}
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	require.NoError(t, os.WriteFile(filepath.Join(repo, "a"), []byte("a"), 0o644))
	git("add", "a")
	git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "a")
	check := func(dbURL string) Check {
		checks, err := Run(context.Background(), repo, func(string) (config.Config, error) {
			c := config.Default()
			c.Database.URL = dbURL
			return c, nil
		})
		require.NoError(t, err)
		for _, c := range checks {
			if c.Name == "workers" {
				return c
			}
		}
		return Check{}
	}
	require.Equal(t, Check{}, check(""), "SQLite has no queue: no workers line")
	c := check(db)
	require.Equal(t, "warn", c.Level)
	require.Contains(t, c.Detail, `the repo has no remote "origin"`)
	git("remote", "add", "origin", remote)
	c = check(db)
	require.Equal(t, "ok", c.Level, c.Detail)
	require.Contains(t, c.Detail, "fetch from and push to origin ("+remote+")")
	git("remote", "set-url", "origin", filepath.Join(dir, "gone.git"))
	c = check(db)
	require.Equal(t, "fail", c.Level)
	require.Contains(t, c.Detail, "cannot reach remote origin")
}
