package planner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDependOnPart(t *testing.T) {
	t.Parallel()
	// bigTask splits into T1-a (d0), T1-b (d1), T1-c (d2).
	p := build(t, rawPlan(bigTask("T1"), rt("T2", "T1-b")), nil)
	require.Equal(t, []string{"T1-a", "T1-b", "T1-c", "T2"}, ids(p.Tasks))
	require.Equal(t, []string{"T1-b"}, p.Task("T2").Dependencies, "a task depends on one part, not on all of them")
	// T2 names no files, which is its only warning.
	require.Equal(t, []string{"T2: lists no files, so it may run in parallel with any task; list its files_to_create or files_to_modify"}, p.Warnings)

	// A part the split did not make: the nearest task that exists, with a
	// warning.
	p = build(t, rawPlan(bigTask("T1"), rt("T2", "T1-z")), nil)
	require.Equal(t, []string{"T1-a", "T1-b", "T1-c"}, p.Task("T2").Dependencies)
	require.Contains(t, p.Warnings, "T2: depends on T1-z, which the plan does not have (T1 was split into T1-a, T1-b, T1-c); it depends on T1 instead")

	// A task that was not split.
	p = build(t, rawPlan(rt("T1"), rt("T2", "T1-a")), nil)
	require.Equal(t, []string{"T1"}, p.Task("T2").Dependencies)
	require.Contains(t, p.Warnings, "T2: depends on T1-a, which the plan does not have (T1 was not split); it depends on T1 instead")

	// A part of no task is an unknown task.
	_, err := Build(rawPlan(rt("T1"), rt("T2", "T9-a")), nil)
	require.EqualError(t, err, `tasks[1].dependencies[0]: unknown task "T9-a"`)
}

func TestDependOnPartInMarkdown(t *testing.T) {
	t.Parallel()
	// The golden specs' second tasks depend on parts in their task lists.
	p, _ := goldenPlan(t, "webapp")
	require.Equal(t, []string{"T1-a"}, p.Task("T2").Dependencies)
	p, _ = goldenPlan(t, "gocli")
	require.Equal(t, []string{"T1-c"}, p.Task("T2").Dependencies)
	for _, w := range p.Warnings {
		require.NotContains(t, w, "T2:", "no warning about T2's dependency")
	}
}
