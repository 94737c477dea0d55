package queue_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/queue"
)

// TestAttemptLongerThanTheLeaseRunsOnce: a live worker's attempt that
// outlasts worker.lease is completed once. The run polls the job often, so
// it looks while River is still recording the result; it must not take the
// finished attempt for a dead worker's and queue it again.
func TestAttemptLongerThanTheLeaseRunsOnce(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	// Long enough that a heartbeat delayed on a loaded machine (a CI run
	// beside other work) is not taken for a dead worker's.
	const lease = time.Second
	var runs atomic.Int32
	stop, err := queue.Start(t.Context(), db, &queue.WorkOpts{Name: "slow", Concurrency: 2, Poll: 100 * time.Millisecond,
		Run: func(ctx context.Context, a queue.Args) (nodes.AttemptResult, error) {
			runs.Add(1)
			time.Sleep(2 * lease)
			return nodes.AttemptResult{Attempt: nodes.Attempt{TaskID: a.TaskID, Attempt: a.Attempt}}, nil
		}})
	require.NoError(t, err)
	t.Cleanup(stop)
	d, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Lease: lease, Poll: 2 * time.Millisecond})
	require.NoError(t, err)
	const n = 6
	for i := range n {
		res, err := d.Dispatch(t.Context(), nodes.AttemptJob{RunID: "run-long", Task: taskOf(fmt.Sprintf("T%d", i)), Attempt: 1}, func(nodes.Activity) {})
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("T%d", i), res.Attempt.TaskID)
	}
	require.EqualValues(t, n, runs.Load(), "each attempt ran once")
	var requeued int
	require.NoError(t, db.Pool().QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE cardinality(errors) > 0`).Scan(&requeued))
	require.Zero(t, requeued, "no finished attempt was handed back to the queue")
	var leases int
	require.NoError(t, db.Pool().QueryRow(context.Background(), `SELECT count(*) FROM attempt_leases`).Scan(&leases))
	require.Zero(t, leases, "the run dropped the leases of the attempts it has")
}
