package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/store"
)

// NewQueueFunc returns a new, empty queue that lives until the test ends.
type NewQueueFunc func(t *testing.T) store.Queue

// RunQueue runs the Queue conformance suite, one parallel subtest per
// behaviour, each on a new queue from newQueue.
func RunQueue(t *testing.T, newQueue NewQueueFunc) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, q store.Queue)
	}{
		{"WorkerSlots", testWorkerSlots},
		{"SilentWorkers", testSilentWorkers},
		{"Leases", testLeases},
		{"LapsedLease", testLapsedLease},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newQueue(t))
		})
	}
}

func slots(t *testing.T, q store.Queue, run string) int {
	t.Helper()
	n, err := q.WorkerSlots(context.Background(), run, time.Minute)
	require.NoError(t, err)
	return n
}

func testWorkerSlots(t *testing.T, q store.Queue) {
	ctx := context.Background()
	require.Equal(t, 0, slots(t, q, "r1"))
	require.NoError(t, q.RegisterWorker(ctx, store.QueueWorker{Name: "box-a:1", Concurrency: 2}))
	require.NoError(t, q.RegisterWorker(ctx, store.QueueWorker{Name: "box-b:2/r1", Run: "r1", Concurrency: 3}))
	require.Equal(t, 5, slots(t, q, "r1"), "a worker for any run and r1's own")
	require.Equal(t, 2, slots(t, q, "r2"), "r1's own workers do not take r2's attempts")

	// A worker that starts again under its name replaces its record.
	require.NoError(t, q.RegisterWorker(ctx, store.QueueWorker{Name: "box-a:1", Concurrency: 1}))
	require.Equal(t, 4, slots(t, q, "r1"))
	require.NoError(t, q.RemoveWorker(ctx, "box-b:2/r1"))
	require.Equal(t, 1, slots(t, q, "r1"))
	require.NoError(t, q.RemoveWorker(ctx, "nobody"), "removing an unknown worker is no error")
}

func testSilentWorkers(t *testing.T, q store.Queue) {
	ctx := context.Background()
	require.NoError(t, q.RegisterWorker(ctx, store.QueueWorker{Name: "box-a:1", Concurrency: 2}))
	time.Sleep(300 * time.Millisecond)
	n, err := q.WorkerSlots(ctx, "r1", 100*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, 0, n, "a worker not seen within the window does not count")
	require.NoError(t, q.TouchWorker(ctx, "box-a:1"))
	n, err = q.WorkerSlots(ctx, "r1", 100*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, 2, n, "a touched worker counts again")
}

func testLeases(t *testing.T, q store.Queue) {
	ctx := context.Background()
	take := func(job int64, run, task string, attempt int, worker string) {
		t.Helper()
		require.NoError(t, q.TakeLease(ctx, store.AttemptLease{JobID: job, RunID: run, TaskID: task, Attempt: attempt,
			Worker: worker, Tool: "worker", Summary: "starting"}, time.Minute))
	}
	take(3, "r1", "T2", 1, "box-a:1")
	take(1, "r1", "T1", 2, "box-a:1")
	take(2, "r1", "T1", 1, "box-b:2")
	take(4, "r2", "T1", 1, "box-b:2")

	l, err := q.GetLease(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, store.AttemptLease{JobID: 3, RunID: "r1", TaskID: "T2", Attempt: 1, Worker: "box-a:1", Tool: "worker", Summary: "starting"}, l)

	ls, err := q.Leases(ctx, "r1")
	require.NoError(t, err)
	var jobs []int64
	for _, l := range ls {
		jobs = append(jobs, l.JobID)
	}
	require.Equal(t, []int64{2, 1, 3}, jobs, "r1's leases by task, then attempt")

	held, err := q.RenewLease(ctx, 3, "box-b:2", time.Minute, "bash", "go test")
	require.NoError(t, err)
	require.False(t, held, "a worker cannot renew another's lease")
	held, err = q.RenewLease(ctx, 3, "box-a:1", time.Minute, "bash", "go test")
	require.NoError(t, err)
	require.True(t, held)
	l, err = q.GetLease(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, "bash", l.Tool)
	require.Equal(t, "go test", l.Summary)

	// Another worker taking the job replaces the lease, and the first can
	// no longer renew or drop it.
	take(3, "r1", "T2", 1, "box-c:3")
	held, err = q.RenewLease(ctx, 3, "box-a:1", time.Minute, "bash", "go test")
	require.NoError(t, err)
	require.False(t, held)
	require.NoError(t, q.DropLease(ctx, 3, "box-a:1"))
	l, err = q.GetLease(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, "box-c:3", l.Worker)
	require.Equal(t, "starting", l.Summary)

	require.NoError(t, q.DropLease(ctx, 3, ""))
	_, err = q.GetLease(ctx, 3)
	require.ErrorIs(t, err, store.ErrNotFound)
	ls, err = q.Leases(ctx, "r3")
	require.NoError(t, err)
	require.Empty(t, ls)
}

func testLapsedLease(t *testing.T, q store.Queue) {
	ctx := context.Background()
	require.NoError(t, q.TakeLease(ctx, store.AttemptLease{JobID: 7, RunID: "r1", TaskID: "T1", Attempt: 1, Worker: "box-a:1"}, 50*time.Millisecond))
	time.Sleep(300 * time.Millisecond)
	l, err := q.GetLease(ctx, 7)
	require.NoError(t, err)
	require.True(t, l.Lapsed, "a lease not renewed in time has lapsed")
	ls, err := q.Leases(ctx, "r1")
	require.NoError(t, err)
	require.Empty(t, ls, "a lapsed lease is no live hold")

	held, err := q.RenewLease(ctx, 7, "box-a:1", time.Minute, "worker", "back")
	require.NoError(t, err)
	require.True(t, held, "a lapsed lease no one took back is still its worker's")
	l, err = q.GetLease(ctx, 7)
	require.NoError(t, err)
	require.False(t, l.Lapsed)
}
