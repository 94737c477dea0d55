package scheduler

import (
	"fmt"

	"github.com/taskloom/taskloom/planner"
)

// Summary counts tasks by status, in the shape of the "tasks" object of
// `taskloom status --json`.
type Summary struct {
	Total      int    `json:"total"`
	Pending    int    `json:"pending"`
	InProgress int    `json:"in_progress"`
	Completed  int    `json:"completed"`
	Failed     int    `json:"failed"`
	Blocked    int    `json:"blocked"`
	Skipped    int    `json:"skipped"`
	Percent    int    `json:"-"`
	Progress   string `json:"progress"` // Percent as "70%"
}

// Summarize counts tasks by status. Progress follows design doc 004, where
// 7 completed tasks of 10 are "70%": it is completed over total, rounded
// down, so it reads 100% only when every task is completed. Skipped tasks do
// not count as progress: their work was not done. An empty list is 0%.
func Summarize(tasks []planner.Task) Summary {
	s := Summary{Total: len(tasks)}
	for i := range tasks {
		switch tasks[i].Status {
		case planner.StatusPending:
			s.Pending++
		case planner.StatusInProgress:
			s.InProgress++
		case planner.StatusCompleted:
			s.Completed++
		case planner.StatusFailed:
			s.Failed++
		case planner.StatusBlocked:
			s.Blocked++
		case planner.StatusSkipped:
			s.Skipped++
		}
	}
	if s.Total > 0 {
		s.Percent = s.Completed * 100 / s.Total
	}
	s.Progress = fmt.Sprintf("%d%%", s.Percent)
	return s
}
