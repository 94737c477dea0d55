package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
)

// TestReadOnlyCommandsCreateNoTables: status, runs and history on a
// PostgreSQL database without taskloom's tables say there are no runs,
// and leave it without tables.
func TestReadOnlyCommandsCreateNoTables(t *testing.T) {
	db := checkpointtest.NewEmptyPostgresSchema(t)
	dir := t.TempDir()
	code, out, errOut := taskloom(t, "runs", "--db", db, "--repo", dir)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out+errOut, "no taskloom runs yet")
	code, _, errOut = taskloom(t, "status", "--db", db, "--repo", dir)
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, "no taskloom runs yet")
	code, _, errOut = taskloom(t, "history", "r1", "--db", db, "--repo", dir)
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, "no taskloom runs yet")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()").Scan(&n))
	require.Zero(t, n, "a read-only command created tables")
}
