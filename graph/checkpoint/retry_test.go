package checkpoint_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

// A call cut short by its own deadline while the store is away heard
// nothing from it: the outage goes on, announced once, and the next call
// gives up at once instead of waiting the whole retry period again.
func TestDeadlineIsNoAnswer(t *testing.T) {
	t.Parallel()
	down := errors.New("connection refused")
	var notices int
	r := checkpoint.NewRetrier("db", &checkpoint.RetryOpts{For: time.Second,
		UnreachableFunc: func(error, time.Duration) { notices++ }}, func(err error) bool { return errors.Is(err, down) })
	failing := func(context.Context) error { return down }

	err := r.Do(context.Background(), "first", failing)
	require.ErrorIs(t, err, checkpoint.ErrStoreUnreachable)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	require.ErrorIs(t, r.Do(ctx, "timed out", func(ctx context.Context) error { return ctx.Err() }), context.DeadlineExceeded)

	start := time.Now()
	err = r.Do(context.Background(), "next", failing)
	require.ErrorIs(t, err, checkpoint.ErrStoreUnreachable)
	require.Less(t, time.Since(start), 500*time.Millisecond, "the store is still down: no new wait")
	require.Equal(t, 1, notices, "one outage, said once")

	require.NoError(t, r.Do(context.Background(), "back", func(context.Context) error { return nil }))
	require.ErrorIs(t, r.Do(context.Background(), "again", failing), checkpoint.ErrStoreUnreachable)
	require.Equal(t, 2, notices, "a new outage after the store answered")
}
