package planner_test

import (
	"fmt"
	"strings"

	"github.com/taskloom/taskloom/planner"
)

func Example() {
	raw := []byte(`{
	  "milestones": [{"id": "M1", "name": "Core"}],
	  "tasks": [
	    {"id": "T1", "title": "Store", "user_story": "As a user I want my notes kept",
	     "acceptance_criteria": ["Notes are saved in a transaction"],
	     "files_to_create": ["store/notes.go"], "milestone_id": "M1", "priority": "high"},
	    {"id": "T2", "title": "Notes API", "user_story": "As a user I want an API",
	     "acceptance_criteria": ["GET /notes lists notes", "The handler uses the store"],
	     "files_to_create": ["api/notes.go"], "files_to_modify": ["store/notes.go"],
	     "milestone_id": "M1"}
	  ]}`)
	p, err := planner.FromRaw(raw, &planner.Opts{Workers: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range p.Tasks {
		fmt.Printf("%s %-9s %.2f %-6s %4.1f min  deps=%s\n", t.ID, t.Title, t.Complexity.Total, t.Complexity.Level,
			t.EstimatedMinutes, strings.Join(t.Dependencies, ","))
	}
	fmt.Println("critical path:", strings.Join(p.Schedule.CriticalPath, " -> "), "makespan:", p.Schedule.MakespanMinutes)

	_, err = planner.FromRaw([]byte(strings.Replace(string(raw), `"milestone_id": "M1"}`, `"milestone_id": "M1", "dependencies": ["T9"]}`, 1)), nil)
	fmt.Println(err)
	// Output:
	// T1 Store     1.25 LOW     2.0 min  deps=
	// T2 Notes API 2.00 LOW     2.6 min  deps=T1
	// critical path: T1 -> T2 makespan: 4.6
	// tasks[1].dependencies[0]: unknown task "T9"
}
