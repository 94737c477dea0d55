package planner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEstimateSchedule(t *testing.T) {
	t.Parallel()
	task := func(id string, mins float64, prio Priority, files []string, deps ...string) Task {
		return Task{ID: id, EstimatedMinutes: mins, Priority: prio, FilesToCreate: files, Dependencies: deps, MilestoneID: "M1"}
	}
	ms := []Milestone{{ID: "M1"}}
	tests := []struct {
		name    string
		tasks   []Task
		workers int
		want    Schedule
	}{
		{
			name:    "empty",
			workers: 2,
			want:    Schedule{Workers: 2, CriticalPath: []string{}},
		},
		{
			name:    "a chain is its own critical path",
			tasks:   []Task{task("T1", 2, PriorityHigh, nil), task("T2", 3, PriorityHigh, nil, "T1"), task("T3", 1, PriorityHigh, nil, "T2")},
			workers: 3,
			want:    Schedule{Workers: 3, MakespanMinutes: 6, LowerBoundMinutes: 6, CriticalPath: []string{"T1", "T2", "T3"}},
		},
		{
			name: "independent tasks share the workers",
			tasks: []Task{task("T1", 4, PriorityMedium, nil), task("T2", 4, PriorityMedium, nil),
				task("T3", 4, PriorityMedium, nil), task("T4", 4, PriorityMedium, nil)},
			workers: 2,
			want:    Schedule{Workers: 2, MakespanMinutes: 8, LowerBoundMinutes: 8, CriticalPath: []string{"T1"}},
		},
		{
			name: "one worker: total work",
			tasks: []Task{task("T1", 1.5, PriorityMedium, nil), task("T2", 2.5, PriorityMedium, nil),
				task("T3", 3, PriorityMedium, nil, "T1")},
			workers: 1,
			want:    Schedule{Workers: 1, MakespanMinutes: 7, LowerBoundMinutes: 7, CriticalPath: []string{"T1", "T3"}},
		},
		{
			name: "overlapping files run one after the other",
			tasks: []Task{task("T1", 3, PriorityMedium, []string{"a.go"}),
				{ID: "T2", EstimatedMinutes: 3, Priority: PriorityMedium, FilesToModify: []string{"a.go"}, MilestoneID: "M1"}},
			workers: 2,
			want:    Schedule{Workers: 2, MakespanMinutes: 6, LowerBoundMinutes: 3, CriticalPath: []string{"T1"}},
		},
		{
			name: "the longest remaining chain goes first",
			// With 2 workers, T1 (which heads a 5-minute chain) must start at
			// once for the makespan to reach its lower bound.
			tasks: []Task{task("T0", 1, PriorityMedium, nil), task("T9", 1, PriorityMedium, nil),
				task("T1", 1, PriorityMedium, nil), task("T2", 4, PriorityMedium, nil, "T1")},
			workers: 2,
			want:    Schedule{Workers: 2, MakespanMinutes: 5, LowerBoundMinutes: 5, CriticalPath: []string{"T1", "T2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := EstimateSchedule(tt.tasks, ms, tt.workers)
			require.Equal(t, tt.want, got)
			require.GreaterOrEqual(t, got.MakespanMinutes, got.LowerBoundMinutes)
		})
	}
}

func TestScheduleFuncIsUsed(t *testing.T) {
	t.Parallel()
	var gotWorkers int
	p := build(t, rawPlan(rt("T1"), rt("T2", "T1")), &Opts{Workers: 3, ScheduleFunc: func(tasks []Task, _ []Milestone, workers int) Schedule {
		gotWorkers = workers
		return Schedule{Workers: workers, MakespanMinutes: 42, CriticalPath: []string{tasks[0].ID}}
	}})
	require.Equal(t, 3, gotWorkers)
	require.Equal(t, Schedule{Workers: 3, MakespanMinutes: 42, CriticalPath: []string{"T1"}}, p.Schedule)
}

func TestNaturalLess(t *testing.T) {
	t.Parallel()
	require.True(t, NaturalLess("T2", "T10"))
	require.False(t, NaturalLess("T10", "T2"))
	require.True(t, NaturalLess("T1-a", "T1-b"))
	require.True(t, NaturalLess("T1", "T1-a"))
	require.True(t, NaturalLess("A9", "B1"))
	require.False(t, NaturalLess("T1", "T1"))
	require.NotEqual(t, NaturalLess("T01", "T1"), NaturalLess("T1", "T01"), "a total order even for equal numbers")
}

func TestMilestoneStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		statuses []Status
		want     Status
	}{
		{"no tasks", nil, StatusPending},
		{"all pending", []Status{StatusPending, StatusPending}, StatusPending},
		{"all completed", []Status{StatusCompleted, StatusCompleted}, StatusCompleted},
		{"completed and skipped", []Status{StatusCompleted, StatusSkipped}, StatusCompleted},
		{"any failed", []Status{StatusCompleted, StatusFailed, StatusInProgress}, StatusFailed},
		{"any in progress", []Status{StatusCompleted, StatusInProgress, StatusPending}, StatusInProgress},
		{"some completed, none running", []Status{StatusCompleted, StatusPending}, StatusPending},
		{"blocked", []Status{StatusBlocked}, StatusPending},
	}
	for _, tt := range tests {
		var tasks []Task
		for _, s := range tt.statuses {
			tasks = append(tasks, Task{MilestoneID: "M1", Status: s})
		}
		tasks = append(tasks, Task{MilestoneID: "M2", Status: StatusFailed})
		require.Equal(t, tt.want, MilestoneStatus("M1", tasks), tt.name)
	}
	p := &Plan{Milestones: []Milestone{{ID: "M1"}, {ID: "M2"}}, Tasks: []Task{{MilestoneID: "M1", Status: StatusCompleted}, {MilestoneID: "M2", Status: StatusInProgress}}}
	p.UpdateMilestones()
	require.Equal(t, StatusCompleted, p.Milestones[0].Status)
	require.Equal(t, StatusInProgress, p.Milestones[1].Status)
}

func TestSoftLimitWarnings(t *testing.T) {
	t.Parallel()
	six := 6.0
	task := rt("T1")
	task.FilesToCreate = files(3, 1)
	task.FilesToModify = []string{"x/1.go", "x/2.go"}
	task.AcceptanceCriteria = []string{"a", "b", "c"}
	task.EstimatedMinutes = &six
	l := Limits{MaxFilesToCreate: 2, MaxFilesToModify: 1, MaxCriteriaPerTask: 2, MaxInputTokens: 1000, MaxTimeMinutes: 5, ComplexityThreshold: 13}
	p := build(t, &RawPlan{Milestones: []RawMilestone{{ID: "M1", Name: "a"}, {ID: "M2", Name: "empty"}}, Tasks: []RawTask{task}}, &Opts{Limits: &l})
	require.Equal(t, []string{
		"T1: 3 files to create, above max_files_to_create (2)",
		"T1: 2 files to modify, above max_files_to_modify (1)",
		"T1: 3 acceptance criteria, above max_criteria_per_task (2)",
		"T1: about 2459 input tokens, above max_input_tokens (1000)",
		"T1: estimated 6 minutes, above max_time_minutes (5)",
		"M2: milestone has no tasks",
	}, p.Warnings)
}
