package ui_test

import (
	"fmt"

	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/ui"
)

// LayoutPlan puts each task one column right of its deepest dependency and
// each milestone in a band of its own.
func ExampleLayoutPlan() {
	tasks := []planner.Task{
		{ID: "T1", MilestoneID: "M1", EstimatedMinutes: 10},
		{ID: "T2", MilestoneID: "M1", EstimatedMinutes: 1},
		{ID: "T3", MilestoneID: "M2", Dependencies: []string{"T1", "T2"}, EstimatedMinutes: 5},
	}
	milestones := []planner.Milestone{{ID: "M1", Name: "Base"}, {ID: "M2", Name: "Top"}}
	lay := ui.LayoutPlan(tasks, milestones, 2)
	for _, n := range lay.Nodes {
		fmt.Printf("%s column %d row %d in %s\n", n.ID, n.Layer, n.Row, n.MilestoneID)
	}
	for _, e := range lay.Edges {
		fmt.Printf("%s -> %s critical=%v\n", e.From, e.To, e.Critical)
	}
	fmt.Println("critical path:", lay.CriticalPath)
	// Output:
	// T1 column 0 row 0 in M1
	// T2 column 0 row 1 in M1
	// T3 column 1 row 0 in M2
	// T1 -> T3 critical=true
	// T2 -> T3 critical=false
	// critical path: [T1 T3]
}
