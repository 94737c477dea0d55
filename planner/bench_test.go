package planner

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// seededRaw generates n raw tasks: random criteria drawn from a vocabulary
// with semantic and vague words, files in layered directories, files to
// modify and dependencies that point at earlier tasks (so the plan is
// acyclic), and enough large tasks that some get split.
func seededRaw(n int, seed uint64) *RawPlan {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	dirs := []string{
		"internal/store", "internal/models", "migrations", "internal/service", "internal/domain",
		"internal/api", "web/templates", "web/static", "cmd/app", "pkg/util", "internal/queue", "internal/auth",
	}
	words := []string{
		"returns", "the", "list", "of", "items", "sorted", "by", "date", "cache", "algorithm", "concurrent",
		"transaction", "etc", "maybe", "user", "can", "delete", "an", "item", "validates", "input", "encryption",
		"pagination", "handler", "responds", "with", "201", "error", "message", "is", "shown",
	}
	raw := &RawPlan{}
	const milestones = 20
	for i := range milestones {
		raw.Milestones = append(raw.Milestones, RawMilestone{ID: fmt.Sprintf("M%d", i+1), Name: fmt.Sprintf("Milestone %d", i+1)})
	}
	var created []string
	for i := range n {
		t := RawTask{
			ID:          fmt.Sprintf("T%d", i+1),
			Title:       fmt.Sprintf("Task number %d", i+1),
			UserStory:   "As a user I want this so that that",
			MilestoneID: fmt.Sprintf("M%d", i*milestones/n+1),
			Priority:    []Priority{PriorityCritical, PriorityHigh, PriorityMedium, PriorityLow}[rng.IntN(4)],
		}
		for c := range 1 + rng.IntN(6) {
			s := fmt.Sprintf("C%d:", c)
			for range 4 + rng.IntN(8) {
				s += " " + words[rng.IntN(len(words))]
			}
			t.AcceptanceCriteria = append(t.AcceptanceCriteria, s)
		}
		nCreate := rng.IntN(7)
		if rng.IntN(10) == 0 {
			nCreate += 8 // a large task
		}
		for j := range nCreate {
			f := fmt.Sprintf("%s/f%d_%d.go", dirs[rng.IntN(len(dirs))], i, j)
			t.FilesToCreate = append(t.FilesToCreate, f)
		}
		if len(created) > 0 {
			for range rng.IntN(4) {
				t.FilesToModify = append(t.FilesToModify, created[rng.IntN(len(created))])
			}
			if nCreate > 0 && rng.IntN(2) == 0 {
				t.TestFiles = append(t.TestFiles, fmt.Sprintf("%s_test.go", t.FilesToCreate[0][:len(t.FilesToCreate[0])-3]))
			}
		}
		if i > 0 {
			for range rng.IntN(4) {
				t.Dependencies = append(t.Dependencies, fmt.Sprintf("T%d", 1+rng.IntN(i)))
			}
		}
		created = append(created, t.FilesToCreate...)
		raw.Tasks = append(raw.Tasks, t)
	}
	return raw
}

func BenchmarkPlan(b *testing.B) {
	const n = 10000
	raw := seededRaw(n, 1)
	opts := &Opts{Workers: 4}
	var p *Plan
	for b.Loop() {
		var err error
		p, err = Build(raw, opts)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/task")
	b.ReportMetric(float64(len(p.Tasks)), "tasks_after_split")
	b.ReportMetric(float64(len(p.Splits)), "splits")
}

func TestSeededPlanIsSound(t *testing.T) {
	t.Parallel()
	raw := seededRaw(500, 7)
	p, err := Build(raw, &Opts{Workers: 4})
	require := func(ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Fatalf(format, args...)
		}
	}
	require(err == nil, "Build: %v", err)
	require(len(p.Splits) > 0, "the seeded plan has splits")
	for _, task := range p.Tasks {
		if task.Complexity.Total > 5 {
			found := false
			for _, w := range p.Warnings {
				if len(w) > len(task.ID) && w[:len(task.ID)+1] == task.ID+":" {
					found = true
				}
			}
			require(found, "task %s above the threshold without a warning", task.ID)
		}
	}
	require(p.Schedule.MakespanMinutes >= p.Schedule.LowerBoundMinutes, "makespan %v < lower bound %v", p.Schedule.MakespanMinutes, p.Schedule.LowerBoundMinutes)
	require(len(p.Schedule.CriticalPath) > 0, "critical path")
}
