package queue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/queue"
	"github.com/taskloom/taskloom/worktree"
)

// BenchmarkRemoteAttempt measures one attempt's round trip through the
// queue with an instant worker on another clone: the base pushed, the job
// queued and taken, the base fetched, the worktree made, the commit pushed
// back, the result read and the commit fetched by the run. It reports ms
// and git processes per attempt (both sides).
func BenchmarkRemoteAttempt(b *testing.B) {
	ctx := context.Background()
	_, runDir, workerDir := repos(b)
	db := newDB(b)
	run, wrk := open(b, runDir), open(b, workerDir)
	startWriter(b, db, "bench:1", wrk, nil)
	d, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Poll: 5 * time.Millisecond})
	require.NoError(b, err)
	head, err := run.Head(ctx)
	require.NoError(b, err)
	git0 := proc.Started("git")
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		id := fmt.Sprintf("T%d", i)
		require.NoError(b, run.Push(ctx, "origin", head, worktree.BaseRef("rb", id, 1)))
		res, err := d.Dispatch(ctx, nodes.AttemptJob{RunID: "rb", Task: taskOf(id), Attempt: 1, Base: head}, func(nodes.Activity) {})
		require.NoError(b, err)
		_, err = run.Fetch(ctx, "origin", worktree.AttemptRef("rb", id, 1), "rb")
		require.NoError(b, err)
		require.True(b, res.Pushed)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/attempt")
	b.ReportMetric(float64(proc.Started("git")-git0)/float64(b.N), "git-calls/attempt")
}
