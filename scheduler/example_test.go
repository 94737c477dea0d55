package scheduler_test

import (
	"fmt"

	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

func Example() {
	tasks := []planner.Task{
		{ID: "T1", Status: planner.StatusPending, Priority: planner.PriorityHigh, EstimatedMinutes: 3, FilesToCreate: []string{"store.go"}},
		{ID: "T2", Status: planner.StatusPending, Priority: planner.PriorityHigh, EstimatedMinutes: 2, FilesToModify: []string{"store.go"}},
		{ID: "T3", Status: planner.StatusPending, Priority: planner.PriorityMedium, EstimatedMinutes: 4, FilesToCreate: []string{"api.go"}},
		{ID: "T4", Status: planner.StatusPending, Priority: planner.PriorityLow, EstimatedMinutes: 1, Dependencies: []string{"T1", "T3"}},
	}
	fmt.Println("batch of 3:", scheduler.SelectBatch(tasks, 3, nil))

	tasks, _ = scheduler.Start(tasks, "T1")
	tasks, _ = scheduler.Pass(tasks, "T1")
	tasks, _ = scheduler.Start(tasks, "T3")
	tasks, escalate, _ := scheduler.Fail(tasks, "T3", "api_test.go: 2 failures")
	fmt.Println("T3 escalated:", escalate, "attempts:", tasks[2].Attempts)
	fmt.Println("progress:", scheduler.Summarize(tasks).Progress)

	s := scheduler.Simulate(tasks, 2, nil)
	fmt.Printf("makespan %g min, lower bound %g, critical path %v\n", s.MakespanMinutes, s.LowerBoundMinutes, s.CriticalPath)
	// Output:
	// batch of 3: [T1 T3]
	// T3 escalated: false attempts: 1
	// progress: 25%
	// makespan 5 min, lower bound 5, critical path [T3 T4]
}

func ExampleDeadlock() {
	tasks := []planner.Task{
		{ID: "T1", Status: planner.StatusCompleted},
		{ID: "T2", Status: planner.StatusFailed, Dependencies: []string{"T1"}},
		{ID: "T3", Status: planner.StatusBlocked, Dependencies: []string{"T2"}},
	}
	fmt.Println(scheduler.Deadlock(tasks))
	// Output:
	// deadlock: T3 waits on T2 (failed)
}
