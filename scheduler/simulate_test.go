package scheduler_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

func TestSimulate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		tasks           []planner.Task
		workers         int
		wantMakespan    float64
		wantLowerBound  float64
		wantCritical    []string
		wantAssignments []scheduler.Assignment
		wantUnscheduled []string
	}{
		{
			name:           "critical path first on two workers",
			tasks:          []planner.Task{tk("T1", mins(3)), tk("T2", mins(2), "T1"), tk("T3", mins(4))},
			workers:        2,
			wantMakespan:   5,
			wantLowerBound: 5,
			wantCritical:   []string{"T1", "T2"},
			wantAssignments: []scheduler.Assignment{
				{TaskID: "T1", Worker: 0, Start: 0, End: 3},
				{TaskID: "T3", Worker: 1, Start: 0, End: 4},
				{TaskID: "T2", Worker: 0, Start: 3, End: 5},
			},
		},
		{
			name:           "one worker runs everything in a row",
			tasks:          []planner.Task{tk("T1", mins(3)), tk("T2", mins(2), "T1"), tk("T3", mins(4))},
			workers:        1,
			wantMakespan:   9,
			wantLowerBound: 9,
			wantCritical:   []string{"T1", "T2"},
			wantAssignments: []scheduler.Assignment{
				{TaskID: "T1", Worker: 0, Start: 0, End: 3},
				{TaskID: "T3", Worker: 0, Start: 3, End: 7}, // its chain (4) beats T2's (2)
				{TaskID: "T2", Worker: 0, Start: 7, End: 9},
			},
		},
		{
			name: "tasks sharing a file never overlap",
			tasks: []planner.Task{
				tk("T1", all(mins(2), files(nil, []string{"a.go"}, nil))),
				tk("T2", all(mins(2), files(nil, nil, []string{"a.go"}))),
				tk("T3", all(mins(1), files(nil, []string{"b.go"}, nil))),
			},
			workers:        3,
			wantMakespan:   4,
			wantLowerBound: 2,
			wantCritical:   []string{"T1"},
			wantAssignments: []scheduler.Assignment{
				{TaskID: "T1", Worker: 0, Start: 0, End: 2},
				{TaskID: "T3", Worker: 1, Start: 0, End: 1},
				{TaskID: "T2", Worker: 0, Start: 2, End: 4},
			},
		},
		{
			name:           "no estimates count one minute each; completed work is done",
			tasks:          []planner.Task{tk("T1", st(completed)), tk("T2", nil, "T1"), tk("T3", nil, "T2"), tk("T4", nil)},
			workers:        4,
			wantMakespan:   2,
			wantLowerBound: 2,
			wantCritical:   []string{"T2", "T3"},
			wantAssignments: []scheduler.Assignment{
				{TaskID: "T2", Worker: 0, Start: 0, End: 1},
				{TaskID: "T4", Worker: 1, Start: 0, End: 1},
				{TaskID: "T3", Worker: 0, Start: 1, End: 2},
			},
		},
		{
			name:            "cycles and unknown dependencies are unscheduled",
			tasks:           []planner.Task{tk("T1", mins(2)), tk("T2", nil, "T3"), tk("T3", nil, "T2"), tk("T4", nil, "T2"), tk("T5", nil, "T0")},
			workers:         2,
			wantMakespan:    2,
			wantLowerBound:  2,
			wantCritical:    []string{"T1"},
			wantAssignments: []scheduler.Assignment{{TaskID: "T1", Worker: 0, Start: 0, End: 2}},
			wantUnscheduled: []string{"T2", "T3", "T4", "T5"},
		},
		{
			name:         "nothing to do",
			tasks:        []planner.Task{tk("T1", st(completed))},
			workers:      0,
			wantCritical: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := scheduler.Simulate(tt.tasks, tt.workers, nil)
			require.Equal(t, max(tt.workers, 1), got.Workers)
			require.Equal(t, tt.wantMakespan, got.MakespanMinutes, "makespan")
			require.Equal(t, tt.wantLowerBound, got.LowerBoundMinutes, "lower bound")
			require.Equal(t, tt.wantCritical, got.CriticalPath, "critical path")
			require.Equal(t, tt.wantAssignments, got.Assignments, "assignments")
			require.Equal(t, tt.wantUnscheduled, got.Unscheduled, "unscheduled")
		})
	}
}

// TestSimulateValid checks every schedule of random plans against the rules:
// each task once, after its dependencies, one task per worker at a time, no
// shared file at the same time, and the makespan at or above the bound.
func TestSimulateValid(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		for _, workers := range []int{1, 3, 8} {
			tasks := randomPlan(rand.New(rand.NewPCG(seed, 7)), 120)
			s := scheduler.Simulate(tasks, workers, milestones)
			name := fmt.Sprintf("seed %d, %d workers", seed, workers)
			require.Len(t, s.Assignments, len(tasks), name)
			require.Empty(t, s.Unscheduled, name)
			at := make(map[string]scheduler.Assignment)
			for _, a := range s.Assignments {
				_, dup := at[a.TaskID]
				require.False(t, dup, "%s: %s scheduled twice", name, a.TaskID)
				at[a.TaskID] = a
				require.LessOrEqual(t, a.End, s.MakespanMinutes, name)
			}
			byID := make(map[string]planner.Task)
			for _, task := range tasks {
				byID[task.ID] = task
				for _, d := range task.Dependencies {
					require.GreaterOrEqual(t, at[task.ID].Start, at[d].End, "%s: %s starts before its dependency %s ends", name, task.ID, d)
				}
			}
			for i, a := range s.Assignments {
				for _, b := range s.Assignments[i+1:] {
					if a.Start >= b.End || b.Start >= a.End {
						continue
					}
					require.NotEqual(t, a.Worker, b.Worker, "%s: %s and %s overlap on worker %d", name, a.TaskID, b.TaskID, a.Worker)
					ta, tb := byID[a.TaskID], byID[b.TaskID]
					for _, f := range ta.Files() {
						require.False(t, slices.Contains(tb.Files(), f), "%s: %s and %s share %s at the same time", name, a.TaskID, b.TaskID, f)
					}
				}
			}
			require.GreaterOrEqual(t, s.MakespanMinutes, s.LowerBoundMinutes, name)
			var path float64
			for k, id := range s.CriticalPath {
				path += byID[id].EstimatedMinutes
				if k > 0 {
					require.Contains(t, byID[id].Dependencies, s.CriticalPath[k-1], "%s: critical path is not a chain", name)
				}
			}
			require.LessOrEqual(t, path, s.LowerBoundMinutes, name)
		}
	}
}

// randomPlan builds n tasks T1..Tn over a random DAG: each task depends on
// up to three of the 20 tasks before it, lasts 1 to 15 minutes, has a random
// priority, belongs to one of five milestones in plan order (see
// milestones), creates its own file and test, and modifies up to two files
// its dependencies created, as the planner's file-based dependencies would
// have it.
func randomPlan(r *rand.Rand, n int) []planner.Task {
	priorities := []planner.Priority{planner.PriorityCritical, planner.PriorityHigh, planner.PriorityMedium, planner.PriorityLow}
	tasks := make([]planner.Task, n)
	for i := range tasks {
		id := fmt.Sprintf("T%d", i+1)
		t := planner.Task{
			ID:               id,
			Status:           planner.StatusPending,
			Priority:         priorities[r.IntN(len(priorities))],
			MilestoneID:      fmt.Sprintf("M%d", 1+i*5/n),
			EstimatedMinutes: float64(1 + r.IntN(15)),
			FilesToCreate:    []string{fmt.Sprintf("pkg%d/%s.go", i%25, id)},
			TestFiles:        []string{fmt.Sprintf("pkg%d/%s_test.go", i%25, id)},
		}
		if i > 0 {
			for range r.IntN(4) {
				lo := max(0, i-20)
				j := lo + r.IntN(i-lo)
				dep := tasks[j].ID
				if slices.Contains(t.Dependencies, dep) {
					continue
				}
				t.Dependencies = append(t.Dependencies, dep)
				if r.IntN(3) == 0 && len(t.FilesToModify) < 2 {
					t.FilesToModify = append(t.FilesToModify, tasks[j].FilesToCreate[0])
				}
			}
		}
		tasks[i] = t
	}
	return tasks
}

var milestones = &scheduler.Opts{MilestoneOrder: []string{"M1", "M2", "M3", "M4", "M5"}}

func BenchmarkSchedule(b *testing.B) {
	for _, workers := range []int{4, 8} {
		b.Run(fmt.Sprintf("N=%d", workers), func(b *testing.B) {
			tasks := randomPlan(rand.New(rand.NewPCG(42, 4242)), 500)
			var s scheduler.Schedule
			for b.Loop() {
				s = scheduler.Simulate(tasks, workers, milestones)
			}
			b.ReportMetric(s.MakespanMinutes/s.LowerBoundMinutes, "makespan/lower_bound")
			b.ReportMetric(s.MakespanMinutes, "makespan_min")
			b.ReportMetric(s.LowerBoundMinutes, "lower_bound_min")
		})
	}
}

func TestWaves(t *testing.T) {
	t.Parallel()
	tasks := []planner.Task{
		tk("T1", files([]string{"a.go"}, nil, nil)),
		tk("T2", files(nil, []string{"a.go"}, nil)), // shares a.go with T1
		tk("T3", nil),
		tk("T4", nil, "T3"),
		tk("T5", nil, "T9"), // never starts
		tk("T6", st(completed)),
	}
	for _, tc := range []struct {
		workers int
		want    [][]string
	}{
		{1, [][]string{{"T3"}, {"T1"}, {"T2"}, {"T4"}}},
		{2, [][]string{{"T3", "T1"}, {"T2", "T4"}}},
		{4, [][]string{{"T3", "T1"}, {"T2", "T4"}}},
	} {
		require.Equal(t, tc.want, scheduler.Waves(tasks, tc.workers, nil), "workers %d", tc.workers)
	}
	require.Equal(t, [][]string{}, scheduler.Waves(nil, 2, nil))
}
