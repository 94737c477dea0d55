package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/migrations"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/sqlite"
	"github.com/taskloom/taskloom/store/storetest"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	storetest.RunConformance(t, "memory")
}

// The drivers' migrations are the same versions, each creating the same
// tables in its own dialect.
func TestDriverMigrationsMatch(t *testing.T) {
	t.Parallel()
	pg, err := postgres.Migrations()
	require.NoError(t, err)
	lite, err := sqlite.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, pg)
	require.Len(t, lite, len(pg), "both drivers have the same versions")
	for i := range pg {
		require.Equal(t, pg[i].ID(), lite[i].ID())
	}
	for _, set := range [][]migrations.Migration{pg, lite} {
		for _, table := range []string{"threads", "checkpoints", "writes", "runs", "agent_histories"} {
			require.Contains(t, set[0].Up, "CREATE TABLE "+table+" ")
		}
	}
}
