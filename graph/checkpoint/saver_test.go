package checkpoint_test

import (
	"testing"

	"github.com/taskloom/taskloom/graph/checkpoint/checkpointtest"
)

func TestSavers(t *testing.T) {
	t.Parallel()
	checkpointtest.ForEachSaver(t, func(t *testing.T, newSaver checkpointtest.NewSaverFunc) {
		checkpointtest.Run(t, newSaver)
	})
}
