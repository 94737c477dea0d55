package planner

import (
	"encoding/json"
	"testing"
)

// The seed corpus lives in testdata/fuzz/<FuzzName>/. Run a fuzzer with
// go test ./planner -run '^$' -fuzz '^FuzzParseRaw$' -fuzztime 20s.

func FuzzParseRaw(f *testing.F) {
	f.Add([]byte(validRaw))
	f.Add([]byte(goodReply))
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := ParseRaw(data)
		if err != nil {
			if raw != nil {
				t.Fatalf("ParseRaw returned a plan and an error %v", err)
			}
			return
		}
		p, err := Build(raw, nil)
		if p == nil {
			if err == nil {
				t.Fatal("Build returned neither a plan nor an error")
			}
			return
		}
		known := map[string]bool{}
		for _, task := range p.Tasks {
			if known[task.ID] {
				t.Fatalf("duplicate task ID %q after Build", task.ID)
			}
			known[task.ID] = true
		}
		for _, task := range p.Tasks {
			for _, d := range task.Dependencies {
				if !known[d] {
					t.Fatalf("task %s depends on unknown %q after Build", task.ID, d)
				}
			}
			if task.Complexity.Total < 0 || task.Complexity.Total > MaxTotal {
				t.Fatalf("task %s: total %g out of range", task.ID, task.Complexity.Total)
			}
		}
		if err == nil && p.Schedule.MakespanMinutes < p.Schedule.LowerBoundMinutes {
			t.Fatalf("makespan %g below the lower bound %g", p.Schedule.MakespanMinutes, p.Schedule.LowerBoundMinutes)
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatalf("marshal the plan: %v", err)
		}
	})
}

func FuzzRepair(f *testing.F) {
	f.Add(`{"a": [1, 2,],}`)
	f.Add(`{"tasks": [{"id": "T1"}`)
	f.Add("{\"a\": \"x\ny\" // c\n}")
	f.Fuzz(func(t *testing.T, s string) {
		_ = ExtractJSON(s)
		fixed, changes, ok := Repair(s)
		if !ok {
			return
		}
		if len(changes) == 0 {
			t.Fatal("ok without changes")
		}
		if !json.Valid([]byte(fixed)) {
			t.Fatalf("Repair(%q) = %q, not valid JSON", s, fixed)
		}
		if _, _, again := Repair(fixed); again {
			t.Fatalf("Repair(%q) changed its own valid output %q", s, fixed)
		}
		if json.Valid([]byte(s)) {
			t.Fatalf("Repair changed valid JSON %q", s)
		}
	})
}

func FuzzParseTaskList(f *testing.F) {
	f.Add("## Milestone M1: a\n### Task T1: b\n- acceptance_criteria:\n  - ok\n- files_to_create: a.go, b.go\n")
	f.Fuzz(func(t *testing.T, md string) {
		raw, err := ParseTaskList(md)
		if err == nil {
			if _, err := Build(raw, nil); err != nil && raw == nil {
				t.Fatal("unreachable")
			}
		}
	})
}
