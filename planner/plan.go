package planner

import (
	"fmt"
	"math"

	"github.com/taskloom/taskloom/llm"
)

// Plan is the planner's result. Its JSON is the `plan --json` shape of
// Splits is extra detail for display.
type Plan struct {
	Milestones []Milestone `json:"milestones"`
	// Tasks are the tasks after splitting, in plan order: the raw order,
	// with each split task replaced in place by its parts.
	Tasks    []Task     `json:"tasks"`
	Warnings []string   `json:"warnings"`
	Cycles   [][]string `json:"cycles"`
	Schedule Schedule   `json:"schedule"`
	// Splits lists every auto-split, in the order they happened.
	Splits []Split `json:"-"`
	// Usage is what planning cost in model calls, when the caller
	// measured it (llm.Meter); the run counts it with its attempts.
	Usage llm.Usage `json:"-"`
}

// FromRaw parses raw tasks JSON and builds the plan. See Build.
func FromRaw(data []byte, opts *Opts) (*Plan, error) {
	raw, err := ParseRaw(data)
	if err != nil {
		return nil, err
	}
	return Build(raw, opts)
}

// Build validates raw (a *ValidationError lists every problem with its JSON
// path) and turns it into a plan: it scores every task, auto-splits those
// above the threshold, rewrites dependencies on split tasks to their parts,
// adds file-based dependencies, detects cycles, derives estimated minutes,
// warnings and milestone statuses, and estimates the schedule.
//
// When the dependencies have cycles, Build returns the plan (with Cycles
// filled in and an empty schedule) together with a *CycleError. raw is not
// modified.
func Build(raw *RawPlan, opts *Opts) (*Plan, error) {
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	if raw == nil {
		raw = &RawPlan{}
	}
	cp := &RawPlan{
		Milestones: append([]RawMilestone(nil), raw.Milestones...),
		Tasks:      append([]RawTask(nil), raw.Tasks...),
		Warnings:   raw.Warnings,
		Lines:      raw.Lines,
	}
	if err := cp.Validate(); err != nil {
		return nil, err
	}
	return r.build(cp)
}

func (r *resolved) build(raw *RawPlan) (*Plan, error) {
	p := &Plan{
		Milestones: make([]Milestone, len(raw.Milestones)),
		Tasks:      make([]Task, 0, 2*len(raw.Tasks)),
		Warnings:   append(append([]string{}, raw.Warnings...), r.repoWarnings(raw)...),
		Cycles:     [][]string{},
	}
	for i, m := range raw.Milestones {
		p.Milestones[i] = Milestone{ID: m.ID, Name: m.Name, Description: m.Description, Status: StatusPending}
	}
	sp := newSplitter(r)
	for i := range raw.Tasks {
		sp.ids[raw.Tasks[i].ID] = true
	}
	for i := range raw.Tasks {
		rt := &raw.Tasks[i]
		t := newTask(rt, r.maxAttempts)
		t.Complexity = r.score(&t)
		start := len(p.Tasks)
		var err error
		if p.Tasks, err = sp.split(t, p.Tasks); err != nil {
			return nil, &ValidationError{Issues: []Issue{{Path: fmt.Sprintf("tasks[%d].id", i), Msg: err.Error()}}}
		}
		setMinutes(p.Tasks[start:], rt.EstimatedMinutes)
	}
	p.Splits = nonNilSplits(sp.splits)
	p.Warnings = append(p.Warnings, sp.warnings...)
	p.Warnings = append(p.Warnings, resolvePartDeps(p.Tasks, sp.children)...)
	expandDeps(p.Tasks, sp.children)
	AddFileDependencies(p.Tasks)
	p.Warnings = append(p.Warnings, r.softLimitWarnings(p.Tasks, raw.Lines)...)
	p.UpdateMilestones()
	for _, m := range p.Milestones {
		found := false
		for i := range p.Tasks {
			if p.Tasks[i].MilestoneID == m.ID {
				found = true
				break
			}
		}
		if !found {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s: milestone has no tasks", m.ID))
		}
	}

	if cycles := FindCycles(p.Tasks); len(cycles) > 0 {
		p.Cycles = cycles
		if len(cycles) >= MaxCycles {
			p.Warnings = append(p.Warnings, fmt.Sprintf("only the first %d dependency cycles are listed", MaxCycles))
		}
		p.Schedule = Schedule{Workers: r.workers, CriticalPath: []string{}}
		return p, &CycleError{Cycles: cycles, Paths: CyclePaths(p.Tasks, cycles)}
	}
	p.Schedule = r.scheduleFunc(p.Tasks, p.Milestones, r.workers)
	if p.Schedule.CriticalPath == nil {
		p.Schedule.CriticalPath = []string{}
	}
	return p, nil
}

func nonNilSplits(s []Split) []Split {
	if s == nil {
		return []Split{}
	}
	return s
}

// newTask turns a validated raw task into a pending task.
func newTask(rt *RawTask, maxAttempts int) Task {
	prio := rt.Priority
	if prio == "" {
		prio = PriorityMedium
	}
	cp := func(s []string) []string { return append(make([]string, 0, len(s)), s...) }
	return Task{
		ID:                 rt.ID,
		Title:              rt.Title,
		UserStory:          rt.UserStory,
		AcceptanceCriteria: cp(rt.AcceptanceCriteria),
		FilesToCreate:      cp(rt.FilesToCreate),
		FilesToModify:      cp(rt.FilesToModify),
		TestFiles:          cp(rt.TestFiles),
		Dependencies:       cp(rt.Dependencies),
		MilestoneID:        rt.MilestoneID,
		Priority:           prio,
		Status:             StatusPending,
		MaxAttempts:        maxAttempts,
	}
}

// setMinutes fills estimated_minutes: from the complexity (MinutesFor), or,
// when the raw task gave a figure, that figure shared among its parts in
// proportion to their complexity totals.
func setMinutes(leaves []Task, given *float64) {
	if given == nil {
		for i := range leaves {
			leaves[i].EstimatedMinutes = MinutesFor(leaves[i].Complexity.Total)
		}
		return
	}
	if len(leaves) == 1 {
		leaves[0].EstimatedMinutes = *given
		return
	}
	sum := 0.0
	for i := range leaves {
		sum += leaves[i].Complexity.Total
	}
	for i := range leaves {
		share := 1 / float64(len(leaves))
		if sum > 0 {
			share = leaves[i].Complexity.Total / sum
		}
		leaves[i].EstimatedMinutes = math.Max(0.1, round1(*given*share))
	}
}

// softLimitWarnings reports the tasks over a soft limit of task_size_limits,
// and those that list no files, each with its task's PRODUCT.md line when
// it has one (lines, from a markdown task list).
func (r *resolved) softLimitWarnings(tasks []Task, lines map[string]int) []string {
	l := r.limits
	var out []string
	for i := range tasks {
		t := &tasks[i]
		loc := t.ID + ": "
		if n := lines[SourceKey(t.ID, "", "")]; n > 0 {
			loc = fmt.Sprintf("%s:%d: %s", r.productName, n, loc)
		}
		warn := func(format string, args ...any) { out = append(out, loc+fmt.Sprintf(format, args...)) }
		if len(t.FilesToCreate)+len(t.FilesToModify) == 0 && t.Status != StatusCompleted && t.Status != StatusSkipped {
			// Batches are made of tasks whose files are disjoint: one that
			// names none runs beside anything, even a task editing what it
			// will edit.
			warn("lists no files, so it may run in parallel with any task; list its files_to_create or files_to_modify")
		}
		if n := len(t.FilesToCreate); n > l.MaxFilesToCreate {
			warn("%d files to create, above max_files_to_create (%d)", n, l.MaxFilesToCreate)
		}
		if n := len(t.FilesToModify); n > l.MaxFilesToModify {
			warn("%d files to modify, above max_files_to_modify (%d)", n, l.MaxFilesToModify)
		}
		if n := len(t.AcceptanceCriteria); n > l.MaxCriteriaPerTask {
			warn("%d acceptance criteria, above max_criteria_per_task (%d)", n, l.MaxCriteriaPerTask)
		}
		if n := EstimateTokens(t); n > l.MaxInputTokens {
			warn("about %d input tokens, above max_input_tokens (%d)", n, l.MaxInputTokens)
		}
		if m := t.EstimatedMinutes; m > l.MaxTimeMinutes {
			warn("estimated %g minutes, above max_time_minutes (%g)", m, l.MaxTimeMinutes)
		}
	}
	return out
}

// MilestoneStatus derives a milestone's status from its tasks: failed if
// any failed; completed if all are completed (skipped tasks count as
// completed, and at least one task must be); in_progress if any is in
// progress; otherwise pending.
func MilestoneStatus(id string, tasks []Task) Status {
	n, completed, skipped := 0, 0, 0
	inProgress := false
	for i := range tasks {
		t := &tasks[i]
		if t.MilestoneID != id {
			continue
		}
		n++
		switch t.Status {
		case StatusFailed:
			return StatusFailed
		case StatusCompleted:
			completed++
		case StatusSkipped:
			skipped++
		case StatusInProgress:
			inProgress = true
		}
	}
	switch {
	case n > 0 && completed > 0 && completed+skipped == n:
		return StatusCompleted
	case inProgress:
		return StatusInProgress
	}
	return StatusPending
}

// UpdateMilestones derives every milestone's status from the tasks.
func (p *Plan) UpdateMilestones() {
	for i := range p.Milestones {
		p.Milestones[i].Status = MilestoneStatus(p.Milestones[i].ID, p.Tasks)
	}
}

// Task returns the task with the given ID, or nil.
func (p *Plan) Task(id string) *Task {
	for i := range p.Tasks {
		if p.Tasks[i].ID == id {
			return &p.Tasks[i]
		}
	}
	return nil
}
