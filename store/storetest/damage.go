package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/sqlite"
)

// DamageHead replaces the bytes of thread runID's newest checkpoint in s,
// a *sqlite.Driver or a *postgres.Driver, with bytes that decode as
// nothing, as a torn write or a bad disk would leave them, and returns its
// step.
func DamageHead(tb testing.TB, s any, runID string) int64 {
	tb.Helper()
	ctx := context.Background()
	garbage := []byte{0x00, 0xff, 0x13, 0x37}
	var head int64
	var err error
	switch sv := s.(type) {
	case *sqlite.Driver:
		require.NoError(tb, sv.DB().QueryRowContext(ctx, `SELECT head FROM threads WHERE thread_id = ?`, runID).Scan(&head))
		_, err = sv.DB().ExecContext(ctx, `UPDATE checkpoints SET deltas = ?1,
			snapshot = CASE WHEN snapshot IS NULL THEN NULL ELSE ?1 END WHERE thread_id = ?2 AND step = ?3`, garbage, runID, head)
	case *postgres.Driver:
		require.NoError(tb, sv.Pool().QueryRow(ctx, `SELECT head FROM threads WHERE thread_id = $1`, runID).Scan(&head))
		_, err = sv.Pool().Exec(ctx, `UPDATE checkpoints SET deltas = $1::bytea,
			snapshot = CASE WHEN snapshot IS NULL THEN NULL ELSE $1 END WHERE thread_id = $2 AND step = $3`, garbage, runID, head)
	default:
		tb.Fatalf("DamageHead: %T is neither a SQLite nor a PostgreSQL driver", s)
	}
	require.NoError(tb, err)
	return head
}
