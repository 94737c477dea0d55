package planner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTaskWithoutFilesIsWarnedAbout(t *testing.T) {
	t.Parallel()
	withFiles := rt("T1")
	withFiles.FilesToCreate = []string{"a.go"}
	p := build(t, rawPlan(withFiles, rt("T2")), nil)
	require.Equal(t, []string{"T2: lists no files, so it may run in parallel with any task; list its files_to_create or files_to_modify"}, p.Warnings)
}
