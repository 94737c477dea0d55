package checkpoint_test

import (
	"testing"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
)

// The durable savers run the suite in their own packages (store/sqlite,
// store/postgres); the memory saver runs it here.
func TestMemory(t *testing.T) {
	t.Parallel()
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Saver { return checkpointtest.NewMemory(t) })
}
