package graph_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/sqlite"
)

// blocking is START -> wait -> END, where wait tells entered that it runs
// and returns when release is closed or its context ends.
func blocking(entered chan<- struct{}, release <-chan struct{}) *graph.Graph[state] {
	g := graph.New[state]()
	g.AddNode("wait", func(ctx context.Context, _ state) (state, error) {
		entered <- struct{}{}
		select {
		case <-release:
			var u state
			u.Name.Set("done")
			return u, nil
		case <-ctx.Done():
			return state{}, ctx.Err()
		}
	}, nil)
	g.AddEdge(graph.START, "wait")
	g.AddEdge("wait", graph.END)
	return g
}

// takeOver makes holder the thread's lease holder behind the runtime's
// back: by writing the lease row for the database savers, through Acquire
// at a time past the lease for the memory saver.
func takeOver(t *testing.T, saver checkpoint.Saver, threadID, holder string) {
	t.Helper()
	ctx := context.Background()
	switch s := saver.(type) {
	case *sqlite.Driver:
		_, err := s.DB().ExecContext(ctx, `UPDATE threads SET lease_holder = ?, lease_token = lease_token + 1,
			lease_expires = ? WHERE thread_id = ?`, holder, time.Now().Add(time.Hour).UnixMicro(), threadID)
		require.NoError(t, err)
	case *postgres.Driver:
		_, err := s.Pool().Exec(ctx, `UPDATE threads SET lease_holder = $1, lease_token = lease_token + 1,
			lease_expires = now() + interval '1 hour' WHERE thread_id = $2`, holder, threadID)
		require.NoError(t, err)
	default:
		_, err := saver.Acquire(ctx, threadID, holder, time.Now().Add(time.Hour), 2*time.Hour)
		require.NoError(t, err)
	}
}

// TestLeaseLostToAnotherHolder: when another process takes the thread's
// lease while a node runs, the renewal notices, the run's context is
// cancelled with a *LeaseLostError naming the new holder, and the call
// returns it.
func TestLeaseLostToAnotherHolder(t *testing.T) {
	t.Parallel()
	forEachStoringSaver(t, func(t *testing.T, saver checkpoint.Saver) {
		t.Parallel()
		entered := make(chan struct{}, 1)
		run, err := blocking(entered, nil).Compile(&graph.CompileOpts{Saver: saver, LeaseTTL: 300 * time.Millisecond})
		require.NoError(t, err)
		errs := make(chan error, 1)
		go func() {
			_, err := run.Invoke(context.Background(), "stolen", state{}, nil)
			errs <- err
		}()
		<-entered
		const other = "pid 1, host elsewhere"
		takeOver(t, saver, "stolen", other)
		err = <-errs
		require.ErrorIs(t, err, checkpoint.ErrLeaseLost)
		var lle *graph.LeaseLostError
		require.ErrorAs(t, err, &lle)
		require.Equal(t, "stolen", lle.ThreadID)
		require.Equal(t, other, lle.Holder)
		require.ErrorContains(t, err, "thread stolen: lease lost: another process (pid 1, host elsewhere) took the thread over")
		// The run stopped before its step was checkpointed, and the new
		// holder keeps the lease.
		threads, err := saver.Threads(context.Background())
		require.NoError(t, err)
		require.Len(t, threads, 1)
		require.Equal(t, int64(0), threads[0].Head)
		require.Equal(t, other, threads[0].Holder)
	})
}

// renewSignal is a saver that reports each successful Acquire.
type renewSignal struct {
	checkpoint.Saver
	acquired chan struct{}
}

func (s *renewSignal) Acquire(ctx context.Context, threadID, holder string, now time.Time, ttl time.Duration) (checkpoint.Lease, error) {
	l, err := s.Saver.Acquire(ctx, threadID, holder, now, ttl)
	if err == nil {
		select {
		case s.acquired <- struct{}{}:
		default:
		}
	}
	return l, err
}

// TestLeaseRenewalRidesOutRestart: the server restarts while a node runs;
// the renewal fails, retries, and renews the lease once the server is back,
// before the lease lapses; the run completes.
func TestLeaseRenewalRidesOutRestart(t *testing.T) {
	srv := checkpointtest.StartPostgres(t)
	waiting := make(chan struct{}, 1)
	pg, err := postgres.Open(context.Background(), srv.URL(), &postgres.Opts{Retry: &checkpoint.RetryOpts{
		For:             time.Minute,
		UnreachableFunc: func(error, time.Duration) { waiting <- struct{}{} },
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Close() })
	saver := &renewSignal{Saver: pg, acquired: make(chan struct{}, 1)}

	entered, release := make(chan struct{}, 1), make(chan struct{})
	run, err := blocking(entered, release).Compile(&graph.CompileOpts{Saver: saver, LeaseTTL: 6 * time.Second})
	require.NoError(t, err)
	type result struct {
		res graph.Result[state]
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := run.Invoke(context.Background(), "restart", state{}, nil)
		done <- result{res, err}
	}()
	<-entered
	<-saver.acquired // the lease taken by Invoke
	srv.Stop()
	<-waiting // a renewal met the stopped server
	srv.Start()
	<-saver.acquired // and renewed the lease once it was back
	close(release)
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, "done", r.res.State.Name.Get())
	require.Equal(t, graph.StatusDone, r.res.Status)
}

// TestLeaseLapsesWhileStoreDown: the server goes away for longer than the
// lease lasts; the run stops with a *LeaseLostError when the lease would
// have lapsed, without waiting for the store's whole retry period.
func TestLeaseLapsesWhileStoreDown(t *testing.T) {
	srv := checkpointtest.StartPostgres(t)
	var notices atomic.Int32
	pg, err := postgres.Open(context.Background(), srv.URL(), &postgres.Opts{Retry: &checkpoint.RetryOpts{
		For:             10 * time.Minute,
		UnreachableFunc: func(error, time.Duration) { notices.Add(1) },
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Close() })
	entered := make(chan struct{}, 1)
	run, err := blocking(entered, nil).Compile(&graph.CompileOpts{Saver: pg, LeaseTTL: 1500 * time.Millisecond})
	require.NoError(t, err)
	errs := make(chan error, 1)
	go func() {
		_, err := run.Invoke(context.Background(), "lapsed", state{}, nil)
		errs <- err
	}()
	<-entered
	srv.Stop()
	err = <-errs
	require.ErrorIs(t, err, checkpoint.ErrLeaseLost)
	var lle *graph.LeaseLostError
	require.ErrorAs(t, err, &lle)
	require.Empty(t, lle.Holder)
	require.ErrorContains(t, err, "lease lost: it lapsed before it could be renewed")
	require.Equal(t, int32(1), notices.Load())
}
