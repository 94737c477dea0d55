package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.RunConformance(t, "postgres")
}

func TestIsURL(t *testing.T) {
	t.Parallel()
	require.True(t, postgres.IsURL("postgres://h/db"))
	require.True(t, postgres.IsURL("PostgreSQL://h/db"))
	require.False(t, postgres.IsURL("/tmp/postgres.db"))
}

func TestOpen(t *testing.T) {
	t.Parallel()
	dbURL := checkpointtest.NewEmptyPostgresSchema(t)
	pg, err := postgres.Open(t.Context(), dbURL, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Close() })
	v, err := pg.Migrator().Version(t.Context())
	require.NoError(t, err)
	require.Equal(t, pg.Migrator().Latest(), v, "Open applies the migrations")

	// Other records live in the same database.
	_, err = pg.Pool().Exec(t.Context(), `INSERT INTO runs (id, product_path, repo, status, created_at, updated_at)
		VALUES ('r1', 'PRODUCT.md', '/repo', 'running', now(), now())`)
	require.NoError(t, err)
}

func TestOpenUnreachableMasksPassword(t *testing.T) {
	t.Parallel()
	_, err := postgres.Open(t.Context(), "postgres://u:hunter2@127.0.0.1:1/db?sslmode=disable&connect_timeout=5", nil)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
	require.Contains(t, err.Error(), "postgres://u:xxxxx@127.0.0.1:1/db")
	require.NotContains(t, err.Error(), "\n")
}

// A database opened without migrating, and never migrated, has no
// records: reading them says so with store.ErrNoSchema, and creates no
// table.
func TestNoSchema(t *testing.T) {
	t.Parallel()
	d, err := postgres.Open(t.Context(), checkpointtest.NewEmptyPostgresSchema(t), &postgres.Opts{SkipMigrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	_, err = d.ListRuns(t.Context(), store.ListRunsParams{})
	require.ErrorIs(t, err, store.ErrNoSchema)
	v, err := d.Migrator().Version(t.Context())
	require.NoError(t, err)
	require.Equal(t, 0, v)
}

// openFaultPG opens a saver on a throwaway server, retrying for retryFor;
// unreachable is told of each outage.
func openFaultPG(t *testing.T, srv *checkpointtest.PostgresServer, retryFor time.Duration, unreachable func(error, time.Duration)) *postgres.Driver {
	t.Helper()
	s, err := postgres.Open(t.Context(), srv.URL(), &postgres.Opts{
		Retry: &checkpoint.RetryOpts{For: retryFor, UnreachableFunc: unreachable},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The server stops between two checkpoints; the next Put waits for it, the
// saver says once that it waits, and the server comes back when it does.
// Every checkpoint is stored once, in order, and no write fails.
func TestRestartBetweenPuts(t *testing.T) {
	srv := checkpointtest.StartPostgres(t)
	var notices atomic.Int32
	waiting := make(chan struct{}, 1)
	s := openFaultPG(t, srv, time.Minute, func(err error, retryFor time.Duration) {
		notices.Add(1)
		require.Equal(t, time.Minute, retryFor)
		waiting <- struct{}{}
	})
	ctx := t.Context()
	lease, err := s.Acquire(ctx, "restart", "a", time.Time{}, time.Minute)
	require.NoError(t, err)
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		<-waiting
		srv.Start()
	}()
	for step := range int64(10) {
		if step == 5 {
			srv.Stop()
		}
		cp := checkpointtest.Step("restart", step)
		cp.Snapshot = fmt.Appendf(nil, `{"s":%d}`, step)
		require.NoError(t, s.Put(ctx, lease, cp), "step %d", step)
		require.NoError(t, s.PutWrites(ctx, lease, []checkpoint.Write{{Step: step + 1, TaskID: "t", Kind: checkpoint.WriteUpdate, Payload: []byte("x")}}))
	}
	<-restarted
	require.Equal(t, int32(1), notices.Load(), "the outage is announced once")
	cps, err := s.List(ctx, "restart", 0)
	require.NoError(t, err)
	require.Len(t, cps, 10)
	for i, cp := range cps {
		require.Equal(t, int64(9-i), cp.Step)
	}
	loaded, err := s.Load(ctx, "restart", -1)
	require.NoError(t, err)
	require.Equal(t, int64(9), loaded.Head)
	require.Len(t, loaded.Writes, 1)
}

// A writer keeps writing checkpoints while the server restarts under it
// (stopped with open sessions, which end with SQLSTATE 57P01): each write
// either lands once or is retried until it does.
func TestRestartDuringWrites(t *testing.T) {
	srv := checkpointtest.StartPostgres(t)
	var notices atomic.Int32
	s := openFaultPG(t, srv, time.Minute, func(error, time.Duration) { notices.Add(1) })
	ctx := t.Context()
	lease, err := s.Acquire(ctx, "busy", "a", time.Time{}, time.Minute)
	require.NoError(t, err)
	reached := make(chan struct{})
	restarted := make(chan struct{})
	type result struct {
		steps int64
		err   error
	}
	done := make(chan result, 1)
	go func() {
		// Write until the restart is over and a few more after it.
		var step int64
		after := int64(-1)
		for ; after != 0; step++ {
			if step == 50 {
				close(reached)
			}
			select {
			case <-restarted:
				if after < 0 {
					after = 20
				}
			default:
			}
			if after > 0 {
				after--
			}
			cp := checkpointtest.Step("busy", step)
			if step%10 == 0 {
				cp.Snapshot = []byte(`{}`)
			}
			if err := s.Put(ctx, lease, cp); err != nil {
				done <- result{step, fmt.Errorf("step %d: %w", step, err)}
				return
			}
		}
		done <- result{step, nil}
	}()
	<-reached
	srv.Restart()
	close(restarted)
	res := <-done
	require.NoError(t, res.err)
	require.Equal(t, int32(1), notices.Load(), "the writes met the restart, and it was announced once")
	cps, err := s.List(ctx, "busy", 0)
	require.NoError(t, err)
	require.Len(t, cps, int(res.steps), "each checkpoint once")
	for i, cp := range cps {
		require.Equal(t, res.steps-1-int64(i), cp.Step)
	}
}

// The connection drops after the server committed a Put but before its
// answer: the retry finds the head moved, sees that the checkpoint there is
// its own, and succeeds; a different checkpoint at that step is still a
// conflict.
func TestPutRetriedAfterCommit(t *testing.T) {
	s := storetest.NewPostgres(t)
	ctx := t.Context()
	lease, err := s.Acquire(ctx, "landed", "a", time.Time{}, time.Minute)
	require.NoError(t, err)
	cp := checkpointtest.Step("landed", 0)
	cp.Snapshot = []byte(`{"a":1}`)
	require.NoError(t, s.Put(ctx, lease, cp))
	require.NoError(t, s.PutRetried(ctx, lease, cp), "the retry of a committed Put succeeds")
	require.ErrorIs(t, s.Put(ctx, lease, cp), checkpoint.ErrConflict, "a first try at a taken step is a conflict")
	other := cp
	other.Deltas = []byte(`{"other":true}`)
	require.ErrorIs(t, s.PutRetried(ctx, lease, other), checkpoint.ErrConflict, "someone else's checkpoint is not ours")
	cps, err := s.List(ctx, "landed", 0)
	require.NoError(t, err)
	require.Len(t, cps, 1)
}

// With the server down for longer than the retry period, the operation
// fails with an *UnreachableError after that period; the next one fails at
// once instead of waiting again; once the server is back, writes go on
// with the same lease.
func TestRetryExhausted(t *testing.T) {
	srv := checkpointtest.StartPostgres(t)
	var notices atomic.Int32
	s := openFaultPG(t, srv, 1500*time.Millisecond, func(error, time.Duration) { notices.Add(1) })
	ctx := t.Context()
	lease, err := s.Acquire(ctx, "gone", "a", time.Time{}, time.Hour)
	require.NoError(t, err)
	cp := checkpointtest.Step("gone", 0)
	cp.Snapshot = []byte(`{}`)
	require.NoError(t, s.Put(ctx, lease, cp))

	srv.Stop()
	start := time.Now()
	err = s.Put(ctx, lease, checkpointtest.Step("gone", 1))
	require.ErrorIs(t, err, checkpoint.ErrStoreUnreachable)
	var ue *checkpoint.UnreachableError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 1500*time.Millisecond, ue.For)
	require.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond, "retried for the whole period")
	require.Contains(t, err.Error(), "unreachable for 1.5s")

	// Down: the release after a give-up fails at once.
	start = time.Now()
	require.ErrorIs(t, s.Release(ctx, lease), checkpoint.ErrStoreUnreachable)
	require.Less(t, time.Since(start), 1500*time.Millisecond, "no second wait")
	require.Equal(t, int32(1), notices.Load())

	srv.Start()
	require.NoError(t, s.Put(ctx, lease, checkpointtest.Step("gone", 1)), "the lease outlived the outage")
	loaded, err := s.Load(ctx, "gone", -1)
	require.NoError(t, err)
	require.Equal(t, int64(1), loaded.Head)
}

func TestTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, true},
		{"connection exception", &pgconn.PgError{Code: "08006"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"eof", fmt.Errorf("put: %w", io.EOF), true},
		{"unexpected eof", io.ErrUnexpectedEOF, true},
		{"shutting down text", errors.New("FATAL: the database system is shutting down"), true},
		{"conn closed", errors.New("conn closed"), true},
		{"lease lost", checkpoint.ErrLeaseLost, false},
		{"canceled", context.Canceled, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, postgres.Transient(tc.err), "transient(%v)", tc.err)
		})
	}
}

// The server is down when the records are written and read; each call
// waits for the server (which comes back when the driver says it waits) and
// lands once.
func TestRecordsRideOutRestart(t *testing.T) {
	srv := checkpointtest.StartPostgres(t)
	ctx := context.Background()
	d, err := postgres.Open(ctx, srv.URL(), &postgres.Opts{Retry: &checkpoint.RetryOpts{
		For:             time.Minute,
		UnreachableFunc: func(error, time.Duration) { go srv.Start() },
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	at := storetest.T0

	srv.Stop()
	require.NoError(t, d.CreateRun(ctx, store.Run{ID: "r1", ProductPath: "/p/PRODUCT.md", Repo: "/p", Status: "running", CreatedAt: at, UpdatedAt: at, Meta: []byte(`{}`)}))
	srv.Stop()
	require.NoError(t, d.SetRunStatus(ctx, "r1", "completed", at))
	srv.Stop()
	require.NoError(t, d.SaveHistory(ctx, store.History{RunID: "r1", ConversationID: "r1/T1/1", TaskID: "T1", Attempt: 1, UI: `[]`, API: `[]`, Meta: `{}`, UpdatedAt: at}))
	srv.Stop()
	runs, err := d.ListRuns(ctx, store.ListRunsParams{})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "completed", runs[0].Status)
	srv.Stop()
	h, err := d.GetHistory(ctx, "r1", "r1/T1/1")
	require.NoError(t, err)
	require.Equal(t, "T1", h.TaskID)
}

// A CreateRun whose first try committed but lost its answer succeeds when
// retried, while creating a different run under a taken ID still fails
// with ErrRunExists.
func TestCreateRunRetriedAfterCommit(t *testing.T) {
	t.Parallel()
	d := storetest.NewPostgres(t)
	ctx := t.Context()
	r := store.Run{ID: "r1", ProductPath: "/p/PRODUCT.md", Repo: "/p", Status: "running", CreatedAt: storetest.T0, UpdatedAt: storetest.T0, Meta: []byte(`{}`)}
	require.NoError(t, d.CreateRun(ctx, r))
	require.NoError(t, d.CreateRunRetried(ctx, r), "the retry of a committed CreateRun succeeds")
	require.ErrorIs(t, d.CreateRun(ctx, r), store.ErrRunExists, "a first try at a taken ID fails")
	other := r
	other.ProductPath, other.Repo = "/q/PRODUCT.md", "/q"
	require.ErrorIs(t, d.CreateRunRetried(ctx, other), store.ErrRunExists, "someone else's run is not ours")
	runs, err := d.ListRuns(ctx, store.ListRunsParams{})
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "/p", runs[0].Repo)
}

// A worker killed outright never removes its record; the next worker to
// register forgets it once it is older than store.ForgetWorkersAfter, and
// keeps the records of workers seen since.
func TestRegisterWorkerForgetsLongGoneWorkers(t *testing.T) {
	t.Parallel()
	pg, err := postgres.Open(t.Context(), checkpointtest.NewEmptyPostgresSchema(t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Close() })
	ctx := t.Context()
	_, err = pg.Pool().Exec(ctx, `INSERT INTO attempt_workers (name, run_id, concurrency, seen_at) VALUES
		('killed:1', '', 2, now() - interval '25 hours'), ('slow:2', '', 1, now() - interval '23 hours')`)
	require.NoError(t, err)
	require.NoError(t, pg.RegisterWorker(ctx, store.QueueWorker{Name: "new:3", Concurrency: 1}))
	var names []string
	rows, err := pg.Pool().Query(ctx, `SELECT name FROM attempt_workers ORDER BY name`)
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"new:3", "slow:2"}, names)
}
