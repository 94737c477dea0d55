package planner

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// files returns n file paths spread over dirs directories without layer
// words: d0/f0.go, d1/f1.go, …
func files(n, dirs int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf("d%d/f%d.go", i%max(dirs, 1), i)
	}
	return out
}

// rt is a raw task with a user story and one neutral criterion.
func rt(id string, deps ...string) RawTask {
	return RawTask{
		ID:                 id,
		Title:              "Task " + id,
		UserStory:          "As a user I want " + id,
		AcceptanceCriteria: []string{"It works for " + id},
		Dependencies:       deps,
		MilestoneID:        "M1",
	}
}

func rawPlan(tasks ...RawTask) *RawPlan {
	return &RawPlan{Milestones: []RawMilestone{{ID: "M1", Name: "One"}}, Tasks: tasks}
}

// build builds raw with opts and fails the test on an error other than a
// cycle.
func build(t *testing.T, raw *RawPlan, opts *Opts) *Plan {
	t.Helper()
	p, err := Build(raw, opts)
	if err != nil {
		var ce *CycleError
		require.ErrorAs(t, err, &ce, "Build")
	}
	require.NotNil(t, p)
	return p
}

func ids(tasks []Task) []string {
	out := make([]string, len(tasks))
	for i := range tasks {
		out[i] = tasks[i].ID
	}
	return out
}

func resolvedT(t *testing.T, opts *Opts) *resolved {
	t.Helper()
	r, err := opts.resolve()
	require.NoError(t, err)
	return r
}

// bigTask is a task of 12 files in three directories with a criterion
// about each directory, which the files strategy splits in three.
func bigTask(id string, deps ...string) RawTask {
	return RawTask{ID: id, Title: "Big", UserStory: "s", MilestoneID: "M1", Dependencies: deps,
		AcceptanceCriteria: []string{"The d0 files compile", "The d1 files compile", "The d2 files compile"},
		FilesToCreate:      files(12, 3)}
}
