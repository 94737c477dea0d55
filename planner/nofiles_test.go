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

// From a markdown task list, the warning names the task's line.
func TestTaskWithoutFilesNamesItsLine(t *testing.T) {
	t.Parallel()
	md := "## Milestone M1: Core\n\n### Task T1: Store\n- acceptance_criteria: saves\n- files_to_create: a.go\n\n### Task T2: Think\n- acceptance_criteria: thinks\n"
	p, err := FromProduct(t.Context(), nil, md, &Opts{ProductName: "docs/PRODUCT.md"})
	require.NoError(t, err)
	require.Equal(t, []string{"docs/PRODUCT.md:7: T2: lists no files, so it may run in parallel with any task; list its files_to_create or files_to_modify"}, p.Warnings)
}
