package nodes

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
)

// TestStoreRidesOutRestart: the PostgreSQL server is down when the store
// records a run, its status and a history; each call waits for the server
// (which comes back when the saver says it waits) and lands once.
func TestStoreRidesOutRestart(t *testing.T) {
	srv := checkpointtest.StartPostgres(t)
	ctx := context.Background()
	saver, err := checkpoint.Open(ctx, srv.URL(), &checkpoint.OpenOpts{Retry: &checkpoint.RetryOpts{
		For:             time.Minute,
		UnreachableFunc: func(error, time.Duration) { go srv.Start() },
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = saver.Close() })
	s, err := NewStore(saver)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	srv.Stop()
	require.NoError(t, s.CreateRun(ctx, Run{ID: "r1", ProductPath: "/p/PRODUCT.md", Repo: "/p"}))
	srv.Stop()
	require.NoError(t, s.SetRunStatus(ctx, "r1", RunCompleted))
	srv.Stop()
	rec := &agent.Record{Meta: agent.Metadata{ID: "r1/T1/1"}}
	require.NoError(t, s.Histories("r1").Save(ctx, rec))
	srv.Stop()
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, RunCompleted, runs[0].Status)
	got, err := s.Histories("r1").Load(ctx, "r1/T1/1")
	require.NoError(t, err)
	require.Equal(t, "r1/T1/1", got.Meta.ID)
}

// TestStoreCreateRunRetriedAfterCommit: a CreateRun whose first try
// committed but lost its answer succeeds when retried, while creating a
// different run under a taken ID still fails with ErrRunExists.
func TestStoreCreateRunRetriedAfterCommit(t *testing.T) {
	t.Parallel()
	dbURL := checkpointtest.NewPostgresSchema(t)
	saver, err := checkpoint.Open(context.Background(), dbURL, &checkpoint.OpenOpts{SkipMigrate: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = saver.Close() })
	s, err := NewStore(saver)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	rb, ok := s.b.(*retryBackend)
	require.True(t, ok, "a Postgres store retries: %T", s.b)
	// Each operation commits once, then is run again as after a dropped
	// connection.
	rb.retry = func(ctx context.Context, _ string, fn func(context.Context) error) error {
		if err := fn(ctx); err != nil {
			return err
		}
		return fn(ctx)
	}
	ctx := context.Background()
	require.NoError(t, s.CreateRun(ctx, Run{ID: "r1", ProductPath: "/p/PRODUCT.md", Repo: "/p"}))
	require.ErrorIs(t, s.CreateRun(ctx, Run{ID: "r1", ProductPath: "/q/PRODUCT.md", Repo: "/q"}), ErrRunExists)
	runs, err := s.Runs(ctx)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "/p", runs[0].Repo)
}
