package session

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/queue"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/storetest"
	"github.com/taskloom/taskloom/worktree"
)

// status shows which worker holds each queued attempt and what it does;
// for one no worker holds, what its job says: waiting (and why its last
// try failed), or finished. A run that queued nothing is left alone.
func TestMarkWorkers(t *testing.T) {
	ctx := context.Background()
	db, err := postgres.Open(ctx, checkpointtest.NewEmptyPostgresSchema(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	client, err := river.NewClient(db.RiverDriver(), &river.Config{})
	require.NoError(t, err)
	ids := map[string]int64{}
	for _, a := range []queue.Args{{RunID: "r1", TaskID: "T1", Attempt: 2}, {RunID: "r1", TaskID: "T2", Attempt: 1},
		{RunID: "r1", TaskID: "T4", Attempt: 1}, {RunID: "r1", TaskID: "T5", Attempt: 1}} {
		res, err := client.Insert(ctx, a, nil)
		require.NoError(t, err)
		ids[a.TaskID] = res.Job.ID
	}
	_, err = db.Pool().Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now(), attempt = 1, attempted_by = '{box-b:8}' WHERE id = $1`, ids["T4"])
	require.NoError(t, err)
	_, err = db.Pool().Exec(ctx, `UPDATE river_job SET state = 'retryable', attempt = 1, attempted_by = '{box-c:9}',
		errors = ARRAY['{"at": "2026-01-01T00:00:00Z", "attempt": 1, "error": "fetch: remote gone", "trace": ""}'::jsonb] WHERE id = $1`, ids["T5"])
	require.NoError(t, err)
	require.NoError(t, db.TakeLease(ctx, store.AttemptLease{JobID: ids["T1"], RunID: "r1", TaskID: "T1", Attempt: 2,
		Worker: "box-a:7", Tool: "bash", Summary: "go test ./..."}, time.Minute))
	s := &Session{Saver: db}
	ws := []nodes.WorkerStatus{
		{Worker: 1, TaskID: "T1", Attempt: 2, Activity: nodes.ActivityImplementing},
		{Worker: 2, TaskID: "T2", Attempt: 1, Activity: nodes.ActivityImplementing},
		{Worker: 3, TaskID: "T3", Attempt: 1, Activity: "running tests"},
		{Worker: 4, TaskID: "T4", Attempt: 1, Activity: nodes.ActivityImplementing},
		{Worker: 5, TaskID: "T5", Attempt: 1, Activity: nodes.ActivityImplementing},
	}
	require.NoError(t, s.MarkWorkers(ctx, "r1", ws))
	require.Equal(t, "box-a:7", ws[0].Host)
	require.Equal(t, "bash go test ./...", ws[0].Activity)
	require.Empty(t, ws[1].Host)
	require.Equal(t, "queued; no taskloom worker has taken it yet", ws[1].Activity)
	require.Equal(t, "running tests", ws[2].Activity, "the run's own tests need no worker")
	require.Equal(t, "box-b:8", ws[3].Host)
	require.Equal(t, "finished; the run takes its result next", ws[3].Activity)
	require.Equal(t, "queued again; its last try failed on box-c:9: fetch: remote gone", ws[4].Activity)

	// A SQLite store has no queue, and a run that queued nothing runs its
	// attempts itself: status is left as it is.
	ws[1].Activity = nodes.ActivityImplementing
	require.NoError(t, (&Session{Saver: storetest.NewSQLite(t)}).MarkWorkers(ctx, "r1", ws[1:2]))
	require.Equal(t, nodes.ActivityImplementing, ws[1].Activity)
	require.NoError(t, s.MarkWorkers(ctx, "r2", ws[1:2]))
	require.Equal(t, nodes.ActivityImplementing, ws[1].Activity)
}

// A job that names no repository (an older version queued it) is turned
// away, at no cost of a try, by a worker whose remote does not have its
// base: another repository's. One whose base is on the remote, or whose
// remote does not answer, is taken.
func TestBaseHere(t *testing.T) {
	ctx := context.Background()
	remote := t.TempDir()
	testkit.Git(t, remote, "init", "-q", "--bare")
	repo := testkit.Repo(t, map[string]string{"a.txt": "a\n"})
	testkit.Git(t, repo, "remote", "add", "origin", remote)
	m, err := worktree.Open(ctx, repo, nil)
	require.NoError(t, err)
	other := testkit.Repo(t, map[string]string{"b.txt": "b\n"})
	base := strings.TrimSpace(testkit.Git(t, other, "rev-parse", "HEAD"))
	a := queue.Args{RunID: "r1", TaskID: "T1", Attempt: 1, Job: nodes.AttemptJob{RunID: "r1", Attempt: 1, Base: base}}

	require.False(t, baseHere(ctx, m, "origin", a), "another repository's job")
	testkit.Git(t, other, "push", "-q", remote, "HEAD:"+worktree.BaseRef("r1", "T1", 1))
	require.True(t, baseHere(ctx, m, "origin", a), "the base is on the remote")
	require.True(t, baseHere(ctx, m, "nowhere", a), "a remote that does not answer decides nothing")
	named := queue.Args{Project: "0123456789abcdef0123456789abcdef01234567", Job: nodes.AttemptJob{Base: base}}
	require.True(t, baseHere(ctx, m, "origin", named), "a job that names its repository is for SameProject to judge")
}

// A job carries the run's config without its secrets: River keeps the job
// in a database other projects may share. The worker puts back its own
// MCP secrets, from its config or its environment.
func TestJobConfigKeepsNoSecrets(t *testing.T) {
	t.Setenv("MCP_FROM_ENV", "from-the-worker-env")
	var c config.Config
	c.Database.URL = "postgres://u:dbpass@h/db"
	c.MCP.Servers = []config.MCPServer{
		{Name: "tools", Command: []string{"srv"}, Env: map[string]string{"MCP_TOKEN": "tok-secret-1", "MCP_FROM_ENV": "tok-secret-2", "MCP_NOWHERE": "tok-secret-3"}},
		{Name: "web", URL: "https://u:urlpass@mcp.example/mcp?token=tok-secret-4"},
	}
	job := jobConfig(c)
	data, err := json.Marshal(job)
	require.NoError(t, err)
	for _, secret := range []string{"dbpass", "tok-secret-1", "tok-secret-2", "tok-secret-3", "urlpass", "tok-secret-4"} {
		require.NotContains(t, string(data), secret)
	}
	own := []config.MCPServer{
		{Name: "tools", Env: map[string]string{"MCP_TOKEN": "worker-token"}},
		{Name: "web", URL: "https://u:worker-pass@mcp.example/mcp?token=worker-tok"},
	}
	got := workerSecrets(job.MCP.Servers, own)
	require.Equal(t, map[string]string{"MCP_TOKEN": "worker-token", "MCP_FROM_ENV": "from-the-worker-env"}, got[0].Env)
	require.Equal(t, "https://u:worker-pass@mcp.example/mcp?token=worker-tok", got[1].URL)
	require.Equal(t, "tok-secret-1", c.MCP.Servers[0].Env["MCP_TOKEN"], "the run's own config is untouched")
}
