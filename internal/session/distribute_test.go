package session

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/store/storetest"
)

// status shows which worker holds each queued attempt and what it does,
// and an attempt that no worker holds as queued, not as being implemented.
func TestMarkWorkers(t *testing.T) {
	ctx := context.Background()
	db := storetest.NewPostgres(t)
	require.NoError(t, db.TakeLease(ctx, store.AttemptLease{JobID: 1, RunID: "r1", TaskID: "T1", Attempt: 2,
		Worker: "box-a:7", Tool: "bash", Summary: "go test ./..."}, time.Minute))
	// The run's repo has the remote its attempts are queued through.
	repo := testkit.Repo(t, map[string]string{"a.txt": "a\n"})
	testkit.Git(t, repo, "remote", "add", "origin", t.TempDir())
	run := nodes.Run{ID: "r1", Repo: repo}
	s := &Session{Saver: db, Cfg: config.Default()}
	ws := []nodes.WorkerStatus{
		{Worker: 1, TaskID: "T1", Attempt: 2, Activity: nodes.ActivityImplementing},
		{Worker: 2, TaskID: "T2", Attempt: 1, Activity: nodes.ActivityImplementing},
		{Worker: 3, TaskID: "T3", Attempt: 1, Activity: "running tests"},
	}
	require.NoError(t, s.MarkWorkers(ctx, run, ws))
	require.Equal(t, "box-a:7", ws[0].Host)
	require.Equal(t, "bash go test ./...", ws[0].Activity)
	require.Empty(t, ws[1].Host)
	require.Equal(t, "queued; no taskloom worker has taken it yet", ws[1].Activity)
	require.Equal(t, "running tests", ws[2].Activity, "the run's own tests need no worker")

	// A SQLite store has no queue, and a run without the remote runs its
	// attempts itself: status is left as it is.
	ws[1].Activity = nodes.ActivityImplementing
	require.NoError(t, (&Session{Saver: storetest.NewSQLite(t), Cfg: config.Default()}).MarkWorkers(ctx, run, ws[1:2]))
	require.Equal(t, nodes.ActivityImplementing, ws[1].Activity)
	alone := nodes.Run{ID: "r1", Repo: testkit.Repo(t, map[string]string{"a.txt": "a\n"})}
	require.NoError(t, s.MarkWorkers(ctx, alone, ws[1:2]))
	require.Equal(t, nodes.ActivityImplementing, ws[1].Activity)
}
