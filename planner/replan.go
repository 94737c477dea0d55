package planner

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// RemovedReason is the error of a task that a replan skipped because the
// edited PRODUCT.md no longer has it.
const RemovedReason = "removed from PRODUCT.md"

// followUpNote starts the implementation notes of a follow-up task, which
// is how a later replan recognises it (it is in no PRODUCT.md).
const followUpNote = "Follow-up of "

var followUpID = regexp.MustCompile(`^(.+)-f[0-9]+$`)

// How a task of the edited PRODUCT.md was matched to a task of the run.
const (
	MatchID    = "id"
	MatchTitle = "title"
	MatchFiles = "files"
)

// ReplanTask is one line of a replan's difference.
type ReplanTask struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// NewID is the ID the edited PRODUCT.md gives the task, when it was
	// matched by title or files under another ID; the run keeps its own.
	NewID     string `json:"new_id,omitempty"`
	MatchedBy string `json:"matched_by,omitempty"`
	// Status is the task's status before the replan, Now after it.
	Status Status `json:"status,omitempty"`
	Now    Status `json:"now"`
	// Fields are the planning fields that differ.
	Fields       []string `json:"fields,omitempty"`
	Dependencies []string `json:"dependencies,omitempty"`
	// FollowUp is the follow-up task added for a completed task's change.
	FollowUp string `json:"follow_up,omitempty"`
}

// Replan is the difference between a run's tasks and the plan of an edited
// PRODUCT.md, and the tasks and milestones the run goes on with.
type Replan struct {
	Kept     []ReplanTask `json:"kept"`
	Changed  []ReplanTask `json:"changed"`
	Added    []ReplanTask `json:"added"`
	Removed  []ReplanTask `json:"removed"`
	Warnings []string     `json:"warnings"`
	// Tasks and Milestones are the merged plan: what the run continues
	// with once the replan is applied.
	Tasks      []Task      `json:"-"`
	Milestones []Milestone `json:"-"`
}

// ReplanOpts configures Replan. nil means the defaults.
type ReplanOpts struct {
	// Opts scores follow-up tasks (task_size_limits, keywords).
	Opts *Opts
	// FollowUps adds a follow-up task for each completed task whose
	// planning fields changed; otherwise such a change is only a warning.
	FollowUps bool
}

// Empty reports whether the replan changes nothing.
func (r *Replan) Empty() bool {
	return len(r.Changed) == 0 && len(r.Added) == 0 && len(r.Removed) == 0
}

// ReplanPlan merges next, the plan of an edited PRODUCT.md, into a run's
// tasks and milestones. Tasks are matched by ID, then by title, then by
// their set of files. Completed tasks are kept and never redone; a change to
// one is a warning (or, with FollowUps, a follow-up task that depends on
// it). Other matched tasks that changed take the new planning fields and
// become pending with fresh attempts. New tasks are added, their
// dependencies rewritten to the IDs the run knows. Unmatched tasks that are
// not done become skipped with RemovedReason; completed ones stay.
func ReplanPlan(old []Task, oldMilestones []Milestone, next *Plan, opts *ReplanOpts) (*Replan, error) {
	if opts == nil {
		opts = &ReplanOpts{}
	}
	r, err := opts.Opts.resolve()
	if err != nil {
		return nil, err
	}
	// The new plan's own warnings (near-miss headings, files against the
	// repository) come first, as plan shows them.
	out := &Replan{Kept: []ReplanTask{}, Changed: []ReplanTask{}, Added: []ReplanTask{}, Removed: []ReplanTask{}, Warnings: append([]string{}, next.Warnings...)}
	match := matchTasks(old, next.Tasks) // new index -> old index
	toOld := map[string]string{}         // new ID -> the run's ID
	for ni, oi := range match {
		toOld[next.Tasks[ni].ID] = old[oi].ID
	}
	mapDeps := func(deps []string) []string {
		outDeps := make([]string, 0, len(deps))
		for _, d := range deps {
			if id, ok := toOld[d]; ok {
				d = id
			}
			if !slices.Contains(outDeps, d) {
				outDeps = append(outDeps, d)
			}
		}
		return outDeps
	}
	taken := map[string]bool{}
	for i := range old {
		taken[old[i].ID] = true
	}
	for i := range next.Tasks {
		taken[next.Tasks[i].ID] = true
	}
	matchedOld := map[int]bool{}
	for ni := range next.Tasks {
		nt := next.Tasks[ni]
		nt.Dependencies = mapDeps(nt.Dependencies)
		oi, ok := match[ni]
		if !ok {
			nt.Status, nt.Attempts, nt.Error = StatusPending, 0, ""
			out.Tasks = append(out.Tasks, nt)
			out.Added = append(out.Added, ReplanTask{ID: nt.ID, Title: nt.Title, Now: StatusPending, Dependencies: nt.Dependencies})
			continue
		}
		matchedOld[oi] = true
		ot := old[oi]
		line := ReplanTask{ID: ot.ID, Title: nt.Title, Status: ot.Status, Now: ot.Status, MatchedBy: matchedBy(ot, nt)}
		if nt.ID != ot.ID {
			line.NewID = nt.ID
		}
		line.Fields = changedFields(ot, nt)
		if len(line.Fields) == 0 {
			out.Tasks = append(out.Tasks, ot)
			out.Kept = append(out.Kept, line)
			continue
		}
		if ot.Status == StatusCompleted {
			if !opts.FollowUps {
				out.Tasks = append(out.Tasks, ot)
				out.Warnings = append(out.Warnings, fmt.Sprintf("%s is completed and PRODUCT.md changed its %s; completed work is never redone: replan again with --follow-up to add a task that does the difference",
					ot.ID, strings.Join(line.Fields, ", ")))
				out.Changed = append(out.Changed, line)
				continue
			}
			fu := r.followUp(ot, nt, taken)
			taken[fu.ID] = true
			line.FollowUp = fu.ID
			// The completed task now stands for the edited spec, whose
			// difference its follow-up does, so the next replan sees no
			// change.
			kept := updated(ot, nt)
			kept.Status = StatusCompleted
			out.Tasks = append(out.Tasks, kept, fu)
			out.Changed = append(out.Changed, line)
			out.Added = append(out.Added, ReplanTask{ID: fu.ID, Title: fu.Title, Now: StatusPending, Dependencies: fu.Dependencies})
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s is completed and PRODUCT.md changed its %s; completed work is never redone: follow-up task %s does the difference",
				ot.ID, strings.Join(line.Fields, ", "), fu.ID))
			continue
		}
		u := updated(ot, nt)
		u.Status, u.Attempts, u.Error = StatusPending, 0, ""
		line.Now = StatusPending
		out.Tasks = append(out.Tasks, u)
		out.Changed = append(out.Changed, line)
	}
	for oi := range old {
		if matchedOld[oi] {
			continue
		}
		ot := old[oi]
		if isFollowUp(ot, out.Tasks) {
			out.Tasks = append(out.Tasks, ot)
			out.Kept = append(out.Kept, ReplanTask{ID: ot.ID, Title: ot.Title, Status: ot.Status, Now: ot.Status})
			continue
		}
		line := ReplanTask{ID: ot.ID, Title: ot.Title, Status: ot.Status, Now: ot.Status}
		switch ot.Status {
		case StatusCompleted, StatusSkipped:
		default:
			ot.Status, ot.Error = StatusSkipped, RemovedReason
			line.Now = StatusSkipped
		}
		out.Tasks = append(out.Tasks, ot)
		out.Removed = append(out.Removed, line)
	}
	out.Milestones = mergeMilestones(oldMilestones, next.Milestones, out.Tasks)
	if cycles := FindCycles(out.Tasks); len(cycles) > 0 {
		return out, &CycleError{Cycles: cycles, Paths: CyclePaths(out.Tasks, cycles)}
	}
	return out, nil
}

// matchTasks pairs the tasks of an edited plan with a run's tasks: by ID,
// then by title (case and spacing aside), then by the same non-empty set of
// files. It returns new index -> old index.
func matchTasks(old, next []Task) map[int]int {
	match := map[int]int{}
	used := map[int]bool{}
	pass := func(key func(*Task) string) {
		byKey := map[string]int{}
		for oi := range old {
			if k := key(&old[oi]); k != "" && !used[oi] {
				if _, dup := byKey[k]; !dup {
					byKey[k] = oi
				}
			}
		}
		for ni := range next {
			if _, done := match[ni]; done {
				continue
			}
			if oi, ok := byKey[key(&next[ni])]; ok && !used[oi] {
				match[ni], used[oi] = oi, true
			}
		}
	}
	pass(func(t *Task) string { return t.ID })
	pass(titleKey)
	pass(filesKey)
	return match
}

func titleKey(t *Task) string { return strings.Join(strings.Fields(strings.ToLower(t.Title)), " ") }

func filesKey(t *Task) string {
	files := t.Files()
	if len(files) == 0 {
		return ""
	}
	files = slices.Clone(files)
	slices.Sort(files)
	return strings.Join(files, "\x00")
}

func matchedBy(ot, nt Task) string {
	switch {
	case ot.ID == nt.ID:
		return MatchID
	case titleKey(&ot) == titleKey(&nt):
		return MatchTitle
	}
	return MatchFiles
}

// changedFields names the planning fields in which nt (its dependencies
// already in the run's IDs) differs from ot.
func changedFields(ot, nt Task) []string {
	var f []string
	add := func(name string, differ bool) {
		if differ {
			f = append(f, name)
		}
	}
	add("title", ot.Title != nt.Title)
	add("user_story", ot.UserStory != nt.UserStory)
	add("acceptance_criteria", !slices.Equal(ot.AcceptanceCriteria, nt.AcceptanceCriteria))
	add("files_to_create", !sameSet(ot.FilesToCreate, nt.FilesToCreate))
	add("files_to_modify", !sameSet(ot.FilesToModify, nt.FilesToModify))
	add("test_files", !sameSet(ot.TestFiles, nt.TestFiles))
	add("dependencies", !sameSet(ot.Dependencies, nt.Dependencies))
	add("milestone_id", ot.MilestoneID != nt.MilestoneID)
	add("priority", ot.Priority != nt.Priority)
	return f
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// updated is ot with nt's planning fields; its ID, status, attempts and
// notes stay the run's.
func updated(ot, nt Task) Task {
	u := nt
	u.ID = ot.ID
	u.Status, u.Attempts, u.MaxAttempts, u.Error = ot.Status, ot.Attempts, ot.MaxAttempts, ot.Error
	u.ImplementationNotes = ot.ImplementationNotes
	if u.MaxAttempts == 0 {
		u.MaxAttempts = nt.MaxAttempts
	}
	return u
}

// followUp makes the task that does what an edit of completed task ot asks
// for: the criteria the old task did not have (all of them when only other
// fields changed), on the files both name, after ot.
func (r *resolved) followUp(ot, nt Task, taken map[string]bool) Task {
	id := ""
	for n := 1; ; n++ {
		if id = fmt.Sprintf("%s-f%d", ot.ID, n); !taken[id] {
			break
		}
	}
	var criteria []string
	for _, c := range nt.AcceptanceCriteria {
		if !slices.Contains(ot.AcceptanceCriteria, c) {
			criteria = append(criteria, c)
		}
	}
	if len(criteria) == 0 {
		criteria = slices.Clone(nt.AcceptanceCriteria)
	}
	title := "Follow-up: " + nt.Title
	if len([]rune(title)) > MaxTitleLen {
		title = string([]rune(title)[:MaxTitleLen-1]) + "…"
	}
	// What the completed task created exists now: the follow-up modifies it.
	var modify []string
	for _, f := range append(slices.Clone(nt.FilesToCreate), nt.FilesToModify...) {
		if !slices.Contains(modify, f) {
			modify = append(modify, f)
		}
	}
	t := Task{
		ID: id, Title: title, UserStory: nt.UserStory, AcceptanceCriteria: criteria,
		FilesToCreate: []string{}, FilesToModify: modify, TestFiles: slices.Clone(nt.TestFiles),
		Dependencies: []string{ot.ID}, MilestoneID: nt.MilestoneID, Priority: nt.Priority,
		Status: StatusPending, MaxAttempts: ot.MaxAttempts,
		ImplementationNotes: fmt.Sprintf("%s%s: PRODUCT.md changed this completed task; change the existing code to meet these criteria.", followUpNote, ot.ID),
	}
	if t.MaxAttempts == 0 {
		t.MaxAttempts = r.maxAttempts
	}
	t.Complexity = r.score(&t)
	t.EstimatedMinutes = MinutesFor(t.Complexity.Total)
	return t
}

// isFollowUp reports whether t is a follow-up task a replan added for a
// task that is still in the plan.
func isFollowUp(t Task, tasks []Task) bool {
	m := followUpID.FindStringSubmatch(t.ID)
	if m == nil || !strings.HasPrefix(t.ImplementationNotes, followUpNote+m[1]+":") {
		return false
	}
	return slices.ContainsFunc(tasks, func(o Task) bool { return o.ID == m[1] })
}

// mergeMilestones returns the new milestones, then the old ones that tasks
// kept from the run still name.
func mergeMilestones(old, next []Milestone, tasks []Task) []Milestone {
	out := slices.Clone(next)
	for _, m := range old {
		if slices.ContainsFunc(out, func(o Milestone) bool { return o.ID == m.ID }) {
			continue
		}
		if slices.ContainsFunc(tasks, func(t Task) bool { return t.MilestoneID == m.ID }) {
			out = append(out, m)
		}
	}
	for i := range out {
		out[i].Status = MilestoneStatus(out[i].ID, tasks)
	}
	return out
}

// WriteText prints the difference for a reader: one line per task that
// was kept, changed, added or removed, with its status before and after,
// then the warnings and a count.
func (r *Replan) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	line := func(kind string, t ReplanTask, detail string) {
		status := string(t.Now)
		if t.Status != "" && t.Status != t.Now {
			status = fmt.Sprintf("%s -> %s", t.Status, t.Now)
		}
		fmt.Fprintf(ew, "  %-8s %-8s %-24s %s%s\n", kind, t.ID, status, shorten(t.Title, tableTitleLen), detail)
	}
	renamed := func(t ReplanTask) string {
		if t.NewID == "" {
			return ""
		}
		return fmt.Sprintf(" [%s in PRODUCT.md, matched by %s]", t.NewID, t.MatchedBy)
	}
	for _, t := range r.Kept {
		line("kept", t, renamed(t))
	}
	for _, t := range r.Changed {
		d := " (" + strings.Join(t.Fields, ", ") + ")" + renamed(t)
		if t.FollowUp != "" {
			d += " follow-up " + t.FollowUp
		}
		line("changed", t, d)
	}
	for _, t := range r.Added {
		d := ""
		if len(t.Dependencies) > 0 {
			d = " (after " + strings.Join(t.Dependencies, ", ") + ")"
		}
		line("added", t, d)
	}
	for _, t := range r.Removed {
		d := ""
		if t.Now == StatusSkipped && t.Status != StatusSkipped {
			d = " (" + RemovedReason + ")"
		} else if t.Now == StatusCompleted {
			d = " (completed: kept)"
		}
		line("removed", t, d)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(ew, "warning: %s\n", s)
	}
	fmt.Fprintf(ew, "%d kept, %d changed, %d added, %d removed\n", len(r.Kept), len(r.Changed), len(r.Added), len(r.Removed))
	return ew.err
}

// Summary is the difference in one line, for a run's log and history.
func (r *Replan) Summary() string {
	ids := func(ts []ReplanTask) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = t.ID
		}
		return strings.Join(s, ", ")
	}
	parts := []string{fmt.Sprintf("%d kept", len(r.Kept))}
	for _, p := range []struct {
		name string
		ts   []ReplanTask
	}{{"changed", r.Changed}, {"added", r.Added}, {"removed", r.Removed}} {
		if len(p.ts) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(p.ts), p.name, ids(p.ts)))
		}
	}
	return "replan: " + strings.Join(parts, ", ")
}
