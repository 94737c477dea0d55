package checkpoint_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
)

// A zero now takes the lease on the store's clock: the expiry is the
// store's now plus the TTL, and a lease so taken is renewed on that clock
// by Put, whatever time the checkpoint carries.
func TestAcquireStoreClock(t *testing.T) {
	checkpointtest.ForEachSaver(t, func(t *testing.T, newSaver checkpointtest.NewSaverFunc) {
		t.Parallel()
		s := newSaver(t)
		ctx := t.Context()
		before := time.Now().Add(-time.Second)
		l, err := s.Acquire(ctx, "clock", "a", time.Time{}, time.Hour)
		require.NoError(t, err)
		after := time.Now().Add(time.Second)
		require.True(t, l.Expires.After(before.Add(time.Hour)) && l.Expires.Before(after.Add(time.Hour)),
			"expires %v, want about now+1h", l.Expires)

		// The checkpoint's time is long past: a renewal on it would let the
		// lease lapse at once, and b would take the thread over.
		cp := checkpointtest.Step("clock", 0)
		cp.Snapshot = []byte(`{}`)
		require.NoError(t, s.Put(ctx, l, cp))
		_, err = s.Acquire(ctx, "clock", "b", time.Time{}, time.Hour)
		require.ErrorIs(t, err, checkpoint.ErrThreadBusy)

		// The same holder renews: same token.
		l2, err := s.Acquire(ctx, "clock", "a", time.Time{}, time.Hour)
		require.NoError(t, err)
		require.Equal(t, l.Token, l2.Token)
	})
}
