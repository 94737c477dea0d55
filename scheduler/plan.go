package scheduler

import (
	"math"
	"slices"

	"github.com/taskloom/taskloom/planner"
)

var _ planner.ScheduleFunc = PlanSchedule

// PlanSchedule is Simulate as a planner.ScheduleFunc, with the milestones'
// list order as the milestone order: set planner.Opts.ScheduleFunc to it so
// that `taskloom plan --workers N` estimates with the scheduler's own rules
// and shows the run's waves.
func PlanSchedule(tasks []planner.Task, milestones []planner.Milestone, workers int) planner.Schedule {
	opts := &Opts{MilestoneOrder: make([]string, len(milestones))}
	for i, m := range milestones {
		opts.MilestoneOrder[i] = m.ID
	}
	s := Simulate(tasks, workers, opts)
	return planner.Schedule{
		Workers:           s.Workers,
		MakespanMinutes:   round1(s.MakespanMinutes),
		LowerBoundMinutes: round1(s.LowerBoundMinutes),
		CriticalPath:      s.CriticalPath,
		Waves:             Waves(tasks, workers, opts),
	}
}

// Waves returns the batches a run selects, in order, when every attempt
// passes: each wave is what select_task picks (SelectBatch: up to workers
// available tasks with disjoint files) once the waves before it are done,
// and the run starts the next wave when the whole wave is integrated.
// Tasks that can never start are in no wave.
func Waves(tasks []planner.Task, workers int, opts *Opts) [][]string {
	ts := slices.Clone(tasks)
	at := make(map[string]int, len(ts))
	for i := range ts {
		at[ts[i].ID] = i
	}
	waves := [][]string{}
	for {
		batch := SelectBatch(ts, max(workers, 1), opts)
		if len(batch) == 0 {
			return waves
		}
		for _, id := range batch {
			ts[at[id]].Status = planner.StatusCompleted
		}
		waves = append(waves, batch)
	}
}

// round1 rounds to a tenth of a minute, as the planner's estimates are.
func round1(x float64) float64 { return math.Round(x*10) / 10 }
