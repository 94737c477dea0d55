package planner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// replanTask is a raw task of one criterion and one file to create.
func replanTask(id, title, file string, deps ...string) RawTask {
	return RawTask{ID: id, Title: title, MilestoneID: "M1", AcceptanceCriteria: []string{title + " works"},
		FilesToCreate: []string{file}, Dependencies: deps}
}

func replanBuild(t *testing.T, tasks ...RawTask) *Plan {
	t.Helper()
	p, err := Build(&RawPlan{Milestones: []RawMilestone{{ID: "M1", Name: "One"}}, Tasks: tasks}, nil)
	require.NoError(t, err)
	return p
}

// runTasks is a plan's tasks with the given statuses, as a run holds them.
func runTasks(p *Plan, status map[string]Status) []Task {
	out := append([]Task(nil), p.Tasks...)
	for i := range out {
		if s, ok := status[out[i].ID]; ok {
			out[i].Status = s
		}
	}
	return out
}

func byID(tasks []Task) map[string]Task {
	m := map[string]Task{}
	for _, t := range tasks {
		m[t.ID] = t
	}
	return m
}

func replanIDs(ts []ReplanTask) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func TestReplanMatchesAndMerges(t *testing.T) {
	t.Parallel()
	old := replanBuild(t,
		replanTask("T1", "Store", "store.go"),
		replanTask("T2", "Handler", "handler.go", "T1"),
		replanTask("T3", "Report page", "report.go"),
		replanTask("T4", "Export CSV", "export.go"),
	)
	oldTasks := runTasks(old, map[string]Status{"T1": StatusCompleted, "T2": StatusFailed})
	changedT2 := replanTask("T2", "Handler", "handler.go", "T1")
	changedT2.AcceptanceCriteria = []string{"Handler returns JSON"}
	next := replanBuild(t,
		replanTask("T1", "Store", "store.go"),                 // same ID, same fields: kept
		changedT2,                                             // same ID, new criteria: changed
		replanTask("T9", "Report page", "report.go"),          // T3 by title
		replanTask("T7", "Metrics", "metrics.go", "T1", "T9"), // new, after a completed task and a renamed one
		// T4 is gone: removed
	)
	r, err := ReplanPlan(oldTasks, old.Milestones, next, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"T1", "T3"}, replanIDs(r.Kept))
	require.Equal(t, []string{"T2"}, replanIDs(r.Changed))
	require.Equal(t, []string{"acceptance_criteria"}, r.Changed[0].Fields)
	require.Equal(t, StatusFailed, r.Changed[0].Status)
	require.Equal(t, StatusPending, r.Changed[0].Now)
	require.Equal(t, []string{"T7"}, replanIDs(r.Added))
	require.Equal(t, []string{"T4"}, replanIDs(r.Removed))
	require.Equal(t, MatchTitle, r.Kept[1].MatchedBy)
	require.Equal(t, "T9", r.Kept[1].NewID)
	require.Empty(t, r.Warnings)

	got := byID(r.Tasks)
	require.Len(t, got, 5)
	require.Equal(t, StatusCompleted, got["T1"].Status, "completed work is kept")
	require.Equal(t, StatusPending, got["T2"].Status, "a changed failed task gets fresh attempts")
	require.Equal(t, []string{"Handler returns JSON"}, got["T2"].AcceptanceCriteria)
	require.NotContains(t, got, "T9", "a renamed task keeps the run's ID")
	require.Equal(t, []string{"T1", "T3"}, got["T7"].Dependencies, "new dependencies point at the run's IDs")
	require.Equal(t, StatusSkipped, got["T4"].Status)
	require.Equal(t, RemovedReason, got["T4"].Error)

	var b bytes.Buffer
	require.NoError(t, r.WriteText(&b))
	require.Contains(t, b.String(), "removed  T4       pending -> skipped")
	require.Contains(t, b.String(), "2 kept, 1 changed, 1 added, 1 removed")
	require.Equal(t, "replan: 2 kept, 1 changed (T2), 1 added (T7), 1 removed (T4)", r.Summary())
}

func TestReplanMatchesByFiles(t *testing.T) {
	t.Parallel()
	old := replanBuild(t, replanTask("T1", "Store", "store.go"), replanTask("T2", "Cache", "cache.go"))
	next := replanBuild(t, replanTask("T1", "Store", "store.go"), replanTask("T5", "In-memory cache layer", "cache.go"))
	r, err := ReplanPlan(runTasks(old, nil), old.Milestones, next, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"T2"}, replanIDs(r.Changed))
	require.Equal(t, MatchFiles, r.Changed[0].MatchedBy)
	require.Equal(t, "T5", r.Changed[0].NewID)
	require.Equal(t, []string{"title", "acceptance_criteria"}, r.Changed[0].Fields)
	require.Empty(t, r.Added)
	require.Empty(t, r.Removed)
	require.Equal(t, "In-memory cache layer", byID(r.Tasks)["T2"].Title)
}

func TestReplanCompletedChangeWarnsOrFollowsUp(t *testing.T) {
	t.Parallel()
	old := replanBuild(t, replanTask("T1", "Store", "store.go"), replanTask("T2", "Handler", "handler.go", "T1"))
	oldTasks := runTasks(old, map[string]Status{"T1": StatusCompleted})
	edited := replanTask("T1", "Store", "store.go")
	edited.AcceptanceCriteria = append(edited.AcceptanceCriteria, "Store survives a restart")
	next := replanBuild(t, edited, replanTask("T2", "Handler", "handler.go", "T1"))

	r, err := ReplanPlan(oldTasks, old.Milestones, next, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"T1"}, replanIDs(r.Changed))
	require.Equal(t, StatusCompleted, r.Changed[0].Now)
	require.Len(t, r.Warnings, 1)
	require.Contains(t, r.Warnings[0], "T1 is completed")
	require.Contains(t, r.Warnings[0], "--follow-up")
	require.Equal(t, oldTasks[0], byID(r.Tasks)["T1"], "the completed task is left as it was")
	require.Empty(t, r.Added)

	r, err = ReplanPlan(oldTasks, old.Milestones, next, &ReplanOpts{FollowUps: true})
	require.NoError(t, err)
	require.Equal(t, "T1-f1", r.Changed[0].FollowUp)
	require.Equal(t, []string{"T1-f1"}, replanIDs(r.Added))
	fu := byID(r.Tasks)["T1-f1"]
	require.Equal(t, []string{"Store survives a restart"}, fu.AcceptanceCriteria, "only the new criterion")
	require.Equal(t, []string{"T1"}, fu.Dependencies)
	require.Equal(t, []string{"store.go"}, fu.FilesToModify, "the file the completed task created is modified")
	require.Empty(t, fu.FilesToCreate)
	require.Equal(t, StatusCompleted, byID(r.Tasks)["T1"].Status)

	// Replanning the same PRODUCT.md again changes nothing: the follow-up
	// stays, the completed task matches.
	again, err := ReplanPlan(r.Tasks, r.Milestones, next, &ReplanOpts{FollowUps: true})
	require.NoError(t, err)
	require.True(t, again.Empty(), "second replan: %+v", again)
	require.Equal(t, []string{"T1", "T2", "T1-f1"}, replanIDs(again.Kept))
}

func TestReplanRemovedStatuses(t *testing.T) {
	t.Parallel()
	old := replanBuild(t,
		replanTask("T1", "A", "a.go"), replanTask("T2", "B", "b.go"), replanTask("T3", "C", "c.go"),
		replanTask("T4", "D", "d.go"), replanTask("T5", "E", "e.go"), replanTask("T6", "F", "f.go"))
	oldTasks := runTasks(old, map[string]Status{"T2": StatusCompleted, "T3": StatusFailed, "T4": StatusInProgress,
		"T5": StatusBlocked, "T6": StatusSkipped})
	next := replanBuild(t, replanTask("T9", "Z", "z.go"))
	r, err := ReplanPlan(oldTasks, old.Milestones, next, nil)
	require.NoError(t, err)
	got := byID(r.Tasks)
	for id, want := range map[string]Status{"T1": StatusSkipped, "T2": StatusCompleted, "T3": StatusSkipped,
		"T4": StatusSkipped, "T5": StatusSkipped, "T6": StatusSkipped} {
		require.Equal(t, want, got[id].Status, "%s: got %s, want %s", id, got[id].Status, want)
	}
	require.Equal(t, RemovedReason, got["T4"].Error, "an in-progress task is cancelled")
	require.Empty(t, got["T6"].Error, "a task skipped before keeps its reason")
	require.Len(t, r.Removed, 6)
	require.Len(t, r.Milestones, 1)
}

func TestReplanDependenciesFollowRenames(t *testing.T) {
	t.Parallel()
	old := replanBuild(t, replanTask("T1", "A", "a.go"), replanTask("T2", "B", "b.go", "T1"))
	// T2 is matched by title as T8, which the new T1 depends on.
	next := replanBuild(t, replanTask("T1", "A", "a.go", "T8"), replanTask("T8", "B", "b.go"))
	r, err := ReplanPlan(runTasks(old, nil), old.Milestones, next, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"T2"}, byID(r.Tasks)["T1"].Dependencies)
	require.Empty(t, byID(r.Tasks)["T2"].Dependencies)
}

// A kept task that PRODUCT.md now calls by another ID says so in the text,
// as a changed one does.
func TestReplanTextNamesRenames(t *testing.T) {
	r := &Replan{Kept: []ReplanTask{{ID: "T3", NewID: "T7", MatchedBy: "title", Title: "Write T3.txt", Status: StatusInProgress, Now: StatusPending}}}
	var b strings.Builder
	require.NoError(t, r.WriteText(&b))
	require.Equal(t, "  kept     T3       in_progress -> pending   Write T3.txt [T7 in PRODUCT.md, matched by title]\n"+
		"1 kept, 0 changed, 0 added, 0 removed\n", b.String())
}
