package planner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/tmc/langchaingo/llms"
)

// BreakdownLine is the line the breakdown's first user message contains,
// directly followed by the PRODUCT.md text (the prompt contract).
const BreakdownLine = "Break down this PRODUCT.md"

// ErrNoModel is returned when a PRODUCT.md without an explicit task list is
// given no model.
var ErrNoModel = errors.New("no model to break down the PRODUCT.md")

// BreakdownError is returned when the model never produced a valid plan.
// Issues are the problems of its last answer.
type BreakdownError struct {
	// Section is the section being broken down ("" for the whole file).
	Section  string
	Attempts int
	Issues   []Issue
}

func (e *BreakdownError) Error() string {
	where := ""
	if e.Section != "" {
		where = fmt.Sprintf(" for section %q", e.Section)
	}
	return fmt.Sprintf("breakdown: the model gave no valid plan%s after %d attempts; problems in its last answer: %s",
		where, e.Attempts, (&ValidationError{Issues: e.Issues}).Error())
}

// Unwrap makes errors.Is(err, ErrInvalidPlan) true.
func (e *BreakdownError) Unwrap() error { return ErrInvalidPlan }

// FromProduct breaks a PRODUCT.md down (see Breakdown) and builds the plan
// (see Build).
func FromProduct(ctx context.Context, model llms.Model, productMD string, opts *Opts) (*Plan, error) {
	raw, err := Breakdown(ctx, model, productMD, opts)
	if err != nil {
		return nil, err
	}
	return Build(raw, opts)
}

// Breakdown turns a PRODUCT.md into validated raw tasks.
//
// A PRODUCT.md with an explicit task list (HasTaskList) is parsed without a
// model. Otherwise the model is asked for raw tasks JSON; its answer is
// taken out of any code fence, repaired where the repair is certain (see
// Repair), and validated. An invalid answer is sent back with the exact
// problems, at most Opts.MaxReasks times; after that Breakdown fails with a
// *BreakdownError. It never invents tasks.
//
// A PRODUCT.md longer than Opts.SectionChars with at least two "## "
// sections is broken down in chunks of whole sections, each under that size
// when possible, with the text before the first section repeated as
// context. Later chunks are told which files earlier ones create, and may
// not create them again. The parts are merged with their tasks renumbered
// T1, T2, … and milestones M1, M2, … in order, dependencies rewritten to
// match.
func Breakdown(ctx context.Context, model llms.Model, productMD string, opts *Opts) (*RawPlan, error) {
	r, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	productMD = normalizeText(productMD)
	if HasTaskList(productMD) {
		r.logger.InfoContext(ctx, "planner: explicit task list, no model call")
		return ParseTaskListFile(r.productName, productMD)
	}
	warnings := TaskHeadingWarnings(r.productName, productMD)
	for _, w := range warnings {
		r.logger.WarnContext(ctx, "planner: "+w)
	}
	raw, err := r.breakdownModel(ctx, model, productMD)
	if err != nil {
		return nil, err
	}
	raw.Warnings = append(warnings, raw.Warnings...)
	return raw, nil
}

func (r *resolved) breakdownModel(ctx context.Context, model llms.Model, productMD string) (*RawPlan, error) {
	if strings.TrimSpace(productMD) == "" {
		return nil, ErrEmpty(r.productName)
	}
	if model == nil {
		return nil, ErrNoModel
	}
	chunks := sectionChunks(productMD, r.sectionChars)
	if len(chunks) == 1 {
		return r.breakdownOne(ctx, model, chunks[0], nil, r.planningContext(ctx, chunks[0].text))
	}
	// Each chunk is shown the repository as a whole, within the budget
	// that the largest chunk leaves.
	largest := ""
	for _, c := range chunks {
		if len(c.text) > len(largest) {
			largest = c.text
		}
	}
	extra := r.planningContext(ctx, largest)
	merged := &RawPlan{}
	created := map[string]string{} // file -> merged task ID
	for i, c := range chunks {
		c.note = fmt.Sprintf("This is part %d of %d of a large PRODUCT.md, planned one part at a time: plan only the sections below.", i+1, len(chunks))
		r.logger.InfoContext(ctx, "planner: breaking down a part", slog.Int("part", i+1), slog.Int("parts", len(chunks)), slog.String("section", c.title))
		raw, err := r.breakdownOne(ctx, model, c, created, extra)
		if err != nil {
			return nil, err
		}
		mergeInto(merged, raw, created)
	}
	if err := merged.Validate(); err != nil {
		return nil, fmt.Errorf("breakdown: merging the parts: %w", err)
	}
	return merged, nil
}

// chunk is one model call's share of the PRODUCT.md.
type chunk struct {
	title string // first section heading, "" for the whole file
	text  string
	note  string
}

// sectionChunks splits a PRODUCT.md longer than limit at its "## " headings
// (outside code fences) and packs consecutive sections into chunks of at
// most limit bytes (a section larger than limit is a chunk of its own).
// The preamble before the first section prefixes every chunk.
func sectionChunks(md string, limit int) []chunk {
	if len(md) <= limit {
		return []chunk{{text: md}}
	}
	lines := strings.SplitAfter(md, "\n")
	var preamble strings.Builder
	var sections []string
	var titles []string
	fenced := false
	for _, line := range lines {
		if isFence(line) {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(line, "## ") {
			sections = append(sections, "")
			titles = append(titles, strings.TrimSpace(strings.TrimPrefix(line, "## ")))
		}
		if len(sections) == 0 {
			preamble.WriteString(line)
		} else {
			sections[len(sections)-1] += line
		}
	}
	if len(sections) < 2 {
		return []chunk{{text: md}}
	}
	pre := preamble.String()
	var out []chunk
	cur, title := "", ""
	for i, s := range sections {
		if cur != "" && len(pre)+len(cur)+len(s) > limit {
			out = append(out, chunk{title: title, text: pre + cur})
			cur = ""
		}
		if cur == "" {
			title = titles[i]
		}
		cur += s
	}
	out = append(out, chunk{title: title, text: pre + cur})
	return out
}

// mergeInto appends part to merged, renumbering its tasks and milestones
// after those already merged, and records the files it creates.
func mergeInto(merged, part *RawPlan, created map[string]string) {
	msIDs := map[string]string{}
	for _, m := range part.Milestones {
		id := fmt.Sprintf("M%d", len(merged.Milestones)+1)
		msIDs[m.ID] = id
		m.ID = id
		merged.Milestones = append(merged.Milestones, m)
	}
	taskIDs := map[string]string{}
	for i, t := range part.Tasks {
		taskIDs[t.ID] = fmt.Sprintf("T%d", len(merged.Tasks)+i+1)
	}
	for _, t := range part.Tasks {
		t.ID = taskIDs[t.ID]
		t.MilestoneID = msIDs[t.MilestoneID]
		deps := make([]string, len(t.Dependencies))
		for j, d := range t.Dependencies {
			deps[j] = taskIDs[d]
		}
		t.Dependencies = deps
		for _, f := range t.FilesToCreate {
			created[f] = t.ID
		}
		merged.Tasks = append(merged.Tasks, t)
	}
}

// breakdownOne asks the model to plan one chunk, re-asking with the
// problems of each invalid answer. created lists the files earlier chunks
// create (nil for a single chunk). extra comes before the PRODUCT.md: the
// repository map and a run's current tasks (planningContext).
func (r *resolved) breakdownOne(ctx context.Context, model llms.Model, c chunk, created map[string]string, extra string) (*RawPlan, error) {
	msgs := []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, r.systemPrompt()),
		llms.TextParts(llms.ChatMessageTypeHuman, userPrompt(c, created, extra)),
	}
	attempts := r.maxReasks + 1
	var issues []Issue
	for attempt := 1; attempt <= attempts; attempt++ {
		resp, err := model.GenerateContent(ctx, msgs, r.callOptions...)
		if err != nil {
			return nil, fmt.Errorf("breakdown: model call %d: %w", attempt, err)
		}
		reply, stop := "", ""
		if resp != nil && len(resp.Choices) > 0 && resp.Choices[0] != nil {
			reply, stop = resp.Choices[0].Content, resp.Choices[0].StopReason
		}
		var raw *RawPlan
		var notes []string
		raw, notes, issues = r.interpret(reply, stop, created)
		if len(issues) == 0 {
			if len(notes) > 0 {
				r.logger.InfoContext(ctx, "planner: repaired the model's JSON", slog.String("repairs", strings.Join(notes, "; ")))
			}
			return raw, nil
		}
		r.logger.WarnContext(ctx, "planner: invalid breakdown answer", slog.Int("attempt", attempt), slog.Int("problems", len(issues)),
			slog.String("first", issues[0].String()))
		if attempt == attempts {
			break
		}
		msgs = append(msgs,
			llms.TextParts(llms.ChatMessageTypeAI, reply),
			llms.TextParts(llms.ChatMessageTypeHuman, reaskPrompt(issues)))
	}
	return nil, &BreakdownError{Section: c.title, Attempts: attempts, Issues: issues}
}

// interpret turns a reply into validated raw tasks, or the problems found.
// The notes say what was repaired.
func (r *resolved) interpret(reply, stop string, created map[string]string) (raw *RawPlan, notes []string, issues []Issue) {
	text := ExtractJSON(reply)
	if !strings.HasPrefix(text, "{") {
		return nil, nil, []Issue{{Msg: "the reply contains no JSON object; reply with the raw tasks JSON object only"}}
	}
	raw, err := ParseRaw([]byte(text))
	if err != nil {
		var ve *ValidationError
		if !errors.As(err, &ve) {
			return nil, nil, []Issue{{Msg: err.Error()}}
		}
		issues := ve.Issues
		if len(issues) == 1 && issues[0].Path == "" { // a JSON syntax error
			truncated := isLengthStop(stop)
			fixed, changes, ok := repair(text, !truncated)
			if !ok {
				if truncated {
					issues[0].Msg += " (the reply was cut off at the output limit: make the plan more compact)"
				}
				return nil, nil, issues
			}
			raw, err = ParseRaw([]byte(fixed))
			if err != nil {
				if errors.As(err, &ve) {
					return nil, nil, append(issues, ve.Issues...)
				}
				return nil, nil, issues
			}
			notes = changes
		} else {
			return nil, nil, issues
		}
	}
	if issues := checkBreakdown(raw, created); len(issues) > 0 {
		return nil, nil, issues
	}
	return raw, notes, nil
}

func isLengthStop(stop string) bool {
	s := strings.ToLower(stop)
	return strings.Contains(s, "length") || strings.Contains(s, "max_tokens") || strings.Contains(s, "max tokens")
}

// checkBreakdown adds the checks a model answer needs beyond the schema:
// no dependency cycle (counting file-based dependencies) and no file that an
// earlier part already creates.
func checkBreakdown(raw *RawPlan, created map[string]string) []Issue {
	var issues []Issue
	for i := range raw.Tasks {
		for j, f := range raw.Tasks[i].FilesToCreate {
			if id, ok := created[f]; ok {
				issues = append(issues, Issue{
					Path: fmt.Sprintf("tasks[%d].files_to_create[%d]", i, j),
					Msg:  fmt.Sprintf("%q is already created by an earlier part of the plan (task %s); list it in files_to_modify", f, id),
				})
			}
		}
	}
	tasks := make([]Task, len(raw.Tasks))
	index := map[string]int{}
	for i := range raw.Tasks {
		tasks[i] = newTask(&raw.Tasks[i], 1)
		index[tasks[i].ID] = i
	}
	AddFileDependencies(tasks)
	for _, c := range FindCycles(tasks) {
		issues = append(issues, Issue{
			Path: fmt.Sprintf("tasks[%d].dependencies", index[c[0]]),
			Msg: fmt.Sprintf("dependency cycle %s (counting file-based dependencies: a task that modifies or tests a file depends on the task that creates it)",
				strings.Join(c, " -> ")),
		})
	}
	return issues
}

func (r *resolved) systemPrompt() string {
	l := r.limits
	return fmt.Sprintf(`You are taskloom's planner. You break a product spec (a PRODUCT.md) down into milestones and small, verifiable coding tasks.

Reply with one JSON object and nothing else: no prose, no code fences. Its shape:
{"milestones": [{"id": "M1", "name": "Core", "description": "..."}],
 "tasks": [{"id": "T1", "title": "...", "user_story": "As a ..., I want ..., so that ...",
            "acceptance_criteria": ["..."], "files_to_create": ["path/a.go"], "files_to_modify": [],
            "test_files": ["path/a_test.go"], "dependencies": [], "milestone_id": "M1",
            "priority": "high", "estimated_minutes": 4}]}

Rules:
- Milestone IDs are M1, M2, …; task IDs are T1, T2, … in execution order. IDs are unique.
- Required task fields: id, title (at most %d characters), milestone_id (a milestone above), acceptance_criteria (1 to %d concrete, testable items).
- priority is one of critical, high, medium, low. estimated_minutes is optional.
- Files are relative paths inside the repository. Each file is created by exactly one task; other tasks list it in files_to_modify.
- At most %d files to create and %d files to modify per task; a task should take a coding agent about %g minutes.
- dependencies lists IDs of other tasks in this plan. A task that modifies or tests a file another task creates depends on that task. No cycles.
- Plan only what the spec asks for. Never add placeholder tasks.`,
		MaxTitleLen, l.MaxCriteriaPerTask, l.MaxFilesToCreate, l.MaxFilesToModify, l.MaxTimeMinutes)
}

func userPrompt(c chunk, created map[string]string, extra string) string {
	var b strings.Builder
	b.WriteString(extra)
	if c.note != "" {
		b.WriteString(c.note)
		b.WriteString("\n")
	}
	if len(created) > 0 {
		files := make([]string, 0, len(created))
		for f := range created {
			files = append(files, f)
		}
		sort.Strings(files)
		b.WriteString("Files already created by earlier parts (modify them, do not create them again): ")
		b.WriteString(strings.Join(files, ", "))
		b.WriteString("\n")
	}
	b.WriteString(BreakdownLine)
	b.WriteString("\n\n")
	b.WriteString(c.text)
	return b.String()
}

func reaskPrompt(issues []Issue) string {
	var b strings.Builder
	b.WriteString("Your answer is not a valid plan. Fix every problem below and reply with the complete corrected JSON object only, no prose and no code fences.\n")
	for _, is := range issues {
		b.WriteString("- ")
		b.WriteString(is.String())
		b.WriteString("\n")
	}
	return b.String()
}
