package scheduler

import (
	"math"

	"github.com/taskloom/taskloom/planner"
)

var _ planner.ScheduleFunc = PlanSchedule

// PlanSchedule is Simulate as a planner.ScheduleFunc, with the milestones'
// list order as the milestone order: set planner.Opts.ScheduleFunc to it so
// that `taskloom plan --workers N` estimates with the scheduler's own rules.
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
	}
}

// round1 rounds to a tenth of a minute, as the planner's estimates are.
func round1(x float64) float64 { return math.Round(x*10) / 10 }
