package doctor

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/internal/testkit"
)

func TestWorkersCheck(t *testing.T) {
	db := checkpointtest.PostgresURL(t)
	dir := t.TempDir()
	repo, remote := filepath.Join(dir, "repo"), filepath.Join(dir, "remote.git")
	testkit.Git(t, dir, "init", "-q", "-b", "main", repo)
	testkit.Git(t, dir, "init", "-q", "--bare", remote)
	git := func(args ...string) { testkit.Git(t, repo, args...) }
	testkit.WriteFiles(t, repo, map[string]string{"a": "a"})
	git("add", "a")
	git("commit", "-q", "-m", "a")
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
