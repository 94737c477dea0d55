package scheduler

import "github.com/taskloom/taskloom/planner"

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
		MakespanMinutes:   s.MakespanMinutes,
		LowerBoundMinutes: s.LowerBoundMinutes,
		CriticalPath:      s.CriticalPath,
	}
}
