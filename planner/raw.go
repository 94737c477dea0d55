package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// RawPlan is the raw tasks JSON of the product contract: what `plan --tasks` reads and
// what the breakdown model must produce.
type RawPlan struct {
	Milestones []RawMilestone `json:"milestones"`
	Tasks      []RawTask      `json:"tasks"`
	// Warnings are problems in the input that are not errors, such as a
	// near-miss task heading in a PRODUCT.md; Build passes them on to the
	// plan's warnings. They are not part of the JSON.
	Warnings []string `json:"-"`
	// Lines are where a PRODUCT.md task list gave each task and file (see
	// SourceKey), for warnings that name the line. Not part of the JSON.
	Lines map[string]int `json:"-"`
}

// RawMilestone is a milestone as the raw tasks JSON gives it.
type RawMilestone struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

// RawTask holds a task's planning fields. EstimatedMinutes is optional; when
// nil it is derived from the complexity.
type RawTask struct {
	ID                 string   `json:"id"`
	Title              string   `json:"title"`
	UserStory          string   `json:"user_story"`
	AcceptanceCriteria []string `json:"acceptance_criteria"`
	FilesToCreate      []string `json:"files_to_create"`
	FilesToModify      []string `json:"files_to_modify"`
	TestFiles          []string `json:"test_files"`
	Dependencies       []string `json:"dependencies"`
	MilestoneID        string   `json:"milestone_id"`
	Priority           Priority `json:"priority,omitempty"`
	EstimatedMinutes   *float64 `json:"estimated_minutes,omitempty"`
}

// Limits of the raw schema.
const (
	MaxTitleLen         = 80
	MaxIDLen            = 40
	MaxNameLen          = 120
	MaxPathLen          = 255
	MaxEstimatedMinutes = 24 * 60
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ErrInvalidPlan is wrapped by every *ValidationError.
var ErrInvalidPlan = errors.New("invalid plan")

// Issue is one problem found in raw tasks, at a JSON path such as
// `tasks[3].dependencies[0]`. Path is empty for a JSON syntax error.
type Issue struct {
	Path string `json:"path"`
	Msg  string `json:"message"`
}

func (i Issue) String() string {
	if i.Path == "" {
		return i.Msg
	}
	return i.Path + ": " + i.Msg
}

// ValidationError lists every problem found in raw tasks.
type ValidationError struct {
	Issues []Issue
}

// maxIssuesInError bounds how many issues Error prints.
const maxIssuesInError = 10

func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, is := range e.Issues {
		if i == maxIssuesInError {
			fmt.Fprintf(&b, "; and %d more", len(e.Issues)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(is.String())
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalidPlan) true.
func (e *ValidationError) Unwrap() error { return ErrInvalidPlan }

// Lines returns one line per issue, for a prompt or a terminal.
func (e *ValidationError) Lines() []string {
	out := make([]string, len(e.Issues))
	for i, is := range e.Issues {
		out[i] = is.String()
	}
	return out
}

// ParseRaw decodes raw tasks JSON and validates it (see Validate). Every
// problem is reported with its JSON path in a *ValidationError; a JSON
// syntax error is reported with its line and column.
//
// A UTF-8 byte order mark and CRLF line ends are accepted.
func ParseRaw(data []byte) (*RawPlan, error) {
	data = bytes.TrimPrefix(data, []byte(bom))
	root, err := decodeJSON(data)
	if err != nil {
		return nil, &ValidationError{Issues: []Issue{{Msg: err.Error()}}}
	}
	d := &rawDecoder{}
	raw := d.plan(root)
	if len(d.issues) == 0 {
		d.issues = raw.validate()
	}
	if len(d.issues) > 0 {
		return nil, &ValidationError{Issues: d.issues}
	}
	return raw, nil
}

// decodeJSON decodes exactly one JSON value, with numbers kept as
// json.Number, and describes a syntax error by line and column.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, describeJSONError(data, dec.InputOffset(), err)
	}
	off := dec.InputOffset()
	for off < int64(len(data)) && strings.ContainsRune(" \t\r\n", rune(data[off])) {
		off++
	}
	if off < int64(len(data)) {
		line, col := lineCol(data, off)
		return nil, fmt.Errorf("invalid JSON at line %d, column %d: unexpected data after the top-level value", line, col)
	}
	return v, nil
}

func describeJSONError(data []byte, off int64, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset - 1 // Offset counts the offending byte
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if len(bytes.TrimSpace(data)) == 0 {
			return errors.New("invalid JSON: the input is empty")
		}
		off = int64(len(data))
		line, col := lineCol(data, off)
		return fmt.Errorf("invalid JSON at line %d, column %d: unexpected end of input (the JSON is truncated)", line, col)
	}
	line, col := lineCol(data, off)
	msg := err.Error()
	if se != nil {
		msg = se.Error()
	}
	return fmt.Errorf("invalid JSON at line %d, column %d: %s", line, col, msg)
}

func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// rawDecoder turns the generic JSON tree into a RawPlan, recording type
// errors with their paths.
type rawDecoder struct {
	issues []Issue
}

func (d *rawDecoder) add(p, format string, args ...any) {
	d.issues = append(d.issues, Issue{Path: p, Msg: fmt.Sprintf(format, args...)})
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func (d *rawDecoder) object(p string, v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		d.add(p, "must be an object, got %s", typeName(v))
	}
	return m, ok
}

func (d *rawDecoder) plan(v any) *RawPlan {
	raw := &RawPlan{}
	m, ok := v.(map[string]any)
	if !ok {
		d.add("", "the top-level value must be an object with \"milestones\" and \"tasks\", got %s", typeName(v))
		return raw
	}
	for _, k := range sortedKeys(m) {
		if k != "milestones" && k != "tasks" {
			d.add(k, "unknown field (allowed: milestones, tasks)")
		}
	}
	if ms, ok := d.requiredArray(m, "milestones", "milestones"); ok {
		for i, e := range ms {
			raw.Milestones = append(raw.Milestones, d.milestone(fmt.Sprintf("milestones[%d]", i), e))
		}
	}
	if ts, ok := d.requiredArray(m, "tasks", "tasks"); ok {
		for i, e := range ts {
			raw.Tasks = append(raw.Tasks, d.task(fmt.Sprintf("tasks[%d]", i), e))
		}
	}
	return raw
}

func (d *rawDecoder) requiredArray(m map[string]any, key, p string) ([]any, bool) {
	v, ok := m[key]
	if !ok {
		d.add(p, "required")
		return nil, false
	}
	a, ok := v.([]any)
	if !ok {
		d.add(p, "must be an array, got %s", typeName(v))
	}
	return a, ok
}

// fields decodes the object at p one field at a time, in key order: set
// decodes the field k (at path kp) and reports false for a field it does
// not know, which is an issue listing allowed. Each of required that the
// object lacks is an issue too.
func (d *rawDecoder) fields(p string, v any, allowed string, required []string, set func(k, kp string, val any) bool) {
	m, ok := d.object(p, v)
	if !ok {
		return
	}
	for _, k := range sortedKeys(m) {
		kp := p + "." + k
		if !set(k, kp, m[k]) {
			d.add(kp, "unknown field (allowed: %s)", allowed)
		}
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			d.add(p+"."+k, "required")
		}
	}
}

func (d *rawDecoder) milestone(p string, v any) RawMilestone {
	var ms RawMilestone
	d.fields(p, v, "id, name, description", []string{"id", "name"}, func(k, kp string, val any) bool {
		switch k {
		case "id":
			ms.ID = d.str(kp, val)
		case "name":
			ms.Name = d.str(kp, val)
		case "description":
			if val != nil {
				ms.Description = d.str(kp, val)
			}
		default:
			return false
		}
		return true
	})
	return ms
}

var taskFields = "id, title, user_story, acceptance_criteria, files_to_create, files_to_modify, test_files, dependencies, milestone_id, priority, estimated_minutes"

func (d *rawDecoder) task(p string, v any) RawTask {
	var t RawTask
	required := []string{"id", "title", "milestone_id", "acceptance_criteria"}
	d.fields(p, v, taskFields, required, func(k, kp string, val any) bool {
		switch k {
		case "id":
			t.ID = d.str(kp, val)
		case "title":
			t.Title = d.str(kp, val)
		case "user_story":
			if val != nil {
				t.UserStory = d.str(kp, val)
			}
		case "acceptance_criteria":
			t.AcceptanceCriteria = d.strs(kp, val)
		case "files_to_create":
			t.FilesToCreate = d.strs(kp, val)
		case "files_to_modify":
			t.FilesToModify = d.strs(kp, val)
		case "test_files":
			t.TestFiles = d.strs(kp, val)
		case "dependencies":
			t.Dependencies = d.strs(kp, val)
		case "milestone_id":
			t.MilestoneID = d.str(kp, val)
		case "priority":
			if val != nil {
				// "High" is high, as the markdown list reads it.
				t.Priority = Priority(strings.ToLower(strings.TrimSpace(d.str(kp, val))))
			}
		case "estimated_minutes":
			t.EstimatedMinutes = d.finite(kp, val)
		default:
			return false
		}
		return true
	})
	return t
}

// finite decodes an optional number: null, and a value that is not a
// finite number (an issue), are nil.
func (d *rawDecoder) finite(p string, v any) *float64 {
	if v == nil {
		return nil
	}
	n, ok := v.(json.Number)
	if s, isStr := v.(string); isStr {
		// A number written as a string ("4"), as models do now and then.
		if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
			n, ok = json.Number(strings.TrimSpace(s)), true
		}
	}
	if !ok {
		d.add(p, "must be a number, got %s", typeName(v))
		return nil
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		d.add(p, "must be a finite number, got %s", n)
		return nil
	}
	return &f
}

func (d *rawDecoder) str(p string, v any) string {
	s, ok := v.(string)
	if !ok {
		d.add(p, "must be a string, got %s", typeName(v))
	}
	return s
}

// strs decodes an array of strings; null is an empty list.
func (d *rawDecoder) strs(p string, v any) []string {
	if v == nil {
		return nil
	}
	a, ok := v.([]any)
	if !ok {
		d.add(p, "must be an array of strings, got %s", typeName(v))
		return nil
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			d.add(fmt.Sprintf("%s[%d]", p, i), "must be a string, got %s", typeName(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Insertion sort: objects are small.
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// Validate checks the schema rules that do not depend on JSON types:
// required values, limits, ID syntax and uniqueness, known milestone and
// dependency IDs, priorities, file paths, and that no file is created by two
// tasks. It also normalizes file paths (path.Clean) and removes duplicate
// entries from lists. A self-dependency is not an error here: Build reports
// it as a cycle.
func (r *RawPlan) Validate() error {
	if issues := r.validate(); len(issues) > 0 {
		return &ValidationError{Issues: issues}
	}
	return nil
}

func (r *RawPlan) validate() []Issue {
	d := &rawDecoder{}
	if len(r.Milestones) == 0 {
		d.add("milestones", "must have at least one milestone")
	}
	if len(r.Tasks) == 0 {
		d.add("tasks", "must have at least one task (taskloom never invents placeholder tasks)")
	}
	milestones := make(map[string]int, len(r.Milestones))
	for i := range r.Milestones {
		ms := &r.Milestones[i]
		p := fmt.Sprintf("milestones[%d]", i)
		if d.checkID(p+".id", ms.ID) {
			if j, dup := milestones[ms.ID]; dup {
				d.add(p+".id", "duplicate milestone ID %q (also milestones[%d])", ms.ID, j)
			} else {
				milestones[ms.ID] = i
			}
		}
		d.checkText(p+".name", ms.Name, MaxNameLen)
	}
	tasks := make(map[string]int, len(r.Tasks))
	for i := range r.Tasks {
		t := &r.Tasks[i]
		p := fmt.Sprintf("tasks[%d]", i)
		if d.checkID(p+".id", t.ID) {
			if j, dup := tasks[t.ID]; dup {
				d.add(p+".id", "duplicate task ID %q (also tasks[%d])", t.ID, j)
			} else {
				tasks[t.ID] = i
			}
			if slices.ContainsFunc(ReservedTaskIDs, func(r string) bool { return strings.EqualFold(r, t.ID) }) {
				d.add(p+".id", "%q names taskloom's own build and revert commits on the branch: give the task another ID", t.ID)
			}
		}
	}
	creators := make(map[string]int)
	for i := range r.Tasks {
		t := &r.Tasks[i]
		p := fmt.Sprintf("tasks[%d]", i)
		d.checkText(p+".title", t.Title, MaxTitleLen)
		if len(t.AcceptanceCriteria) == 0 {
			d.add(p+".acceptance_criteria", "must have at least one criterion")
		}
		t.AcceptanceCriteria = d.dedupe(p+".acceptance_criteria", t.AcceptanceCriteria, func(s string) string { return stripCheckbox(strings.TrimSpace(s)) })
		t.FilesToCreate = d.paths(p+".files_to_create", t.FilesToCreate)
		t.FilesToModify = d.paths(p+".files_to_modify", t.FilesToModify)
		t.TestFiles = d.paths(p+".test_files", t.TestFiles)
		for j, f := range t.FilesToCreate {
			if k, dup := creators[f]; dup {
				d.add(fmt.Sprintf("%s.files_to_create[%d]", p, j), "%q is also created by task %q (tasks[%d]); a file has one creator", f, r.Tasks[k].ID, k)
			} else {
				creators[f] = i
			}
		}
		t.Dependencies = d.dedupe(p+".dependencies", t.Dependencies, strings.TrimSpace)
		for j, dep := range t.Dependencies {
			if _, ok := tasks[dep]; !ok && !partOfKnown(dep, func(id string) bool { _, ok := tasks[id]; return ok }) {
				d.add(fmt.Sprintf("%s.dependencies[%d]", p, j), "unknown task %q", dep)
			}
		}
		if t.MilestoneID == "" {
			d.add(p+".milestone_id", "must not be empty")
		} else if _, ok := milestones[t.MilestoneID]; !ok {
			d.add(p+".milestone_id", "unknown milestone %q", t.MilestoneID)
		}
		if t.Priority != "" && t.Priority.Rank() > 3 {
			d.add(p+".priority", "must be one of critical, high, medium, low, got %q", string(t.Priority))
		}
		if t.EstimatedMinutes != nil {
			if m := *t.EstimatedMinutes; !(m > 0 && m <= MaxEstimatedMinutes) {
				d.add(p+".estimated_minutes", "must be greater than 0 and at most %d, got %g", MaxEstimatedMinutes, m)
			}
		}
	}
	return d.issues
}

// ReservedTaskIDs are the task IDs of taskloom's own worktrees and commits
// (the build checks and the reverts of a bisection), whose trailers a task
// of the same ID would be taken for.
var ReservedTaskIDs = []string{"build", "revert"}

func (d *rawDecoder) checkID(p, id string) bool {
	switch {
	case id == "":
		d.add(p, "must not be empty")
	case len(id) > MaxIDLen:
		d.add(p, "must be at most %d characters, got %d", MaxIDLen, len(id))
	case !idPattern.MatchString(id):
		d.add(p, "must match %s (letters, digits, '_', '.', '-'), got %q", idPattern, id)
	default:
		return true
	}
	return false
}

func (d *rawDecoder) checkText(p, s string, limit int) {
	switch n := utf8.RuneCountInString(s); {
	case strings.TrimSpace(s) == "":
		d.add(p, "must not be empty")
	case !utf8.ValidString(s):
		d.add(p, "must be valid UTF-8")
	case n > limit:
		d.add(p, "must be at most %d characters, got %d", limit, n)
	}
}

// dedupe normalizes each entry, reports empty ones and drops repeats.
func (d *rawDecoder) dedupe(p string, list []string, norm func(string) string) []string {
	if len(list) == 0 {
		return []string{}
	}
	seen := make(map[string]bool, len(list))
	out := make([]string, 0, len(list))
	for i, s := range list {
		s = norm(s)
		if s == "" {
			d.add(fmt.Sprintf("%s[%d]", p, i), "must not be empty")
			continue
		}
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func (d *rawDecoder) paths(p string, list []string) []string {
	out := make([]string, 0, len(list))
	seen := make(map[string]bool, len(list))
	for i, s := range list {
		ip := fmt.Sprintf("%s[%d]", p, i)
		s = strings.TrimSpace(s)
		c := NormalizePath(s)
		switch {
		case s == "":
			d.add(ip, "must not be empty")
		case strings.HasPrefix(s, "/") || strings.Contains(s, "\\") || c == ".." || strings.HasPrefix(c, "../"):
			d.add(ip, "%q must be a relative path inside the repository (no leading '/', no '..', no '\\')", s)
		case c == ".":
			d.add(ip, "%q is not a file path", s)
		case len(c) > MaxPathLen:
			d.add(ip, "must be at most %d characters, got %d", MaxPathLen, len(c))
		case !seen[c]:
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// NormalizePath is the form in which file paths are compared: trimmed and
// cleaned (path.Clean), so that "./src/a.go" and "src//b/../a.go" are both
// "src/a.go". Validate rejects backslashes, so paths use forward slashes.
func NormalizePath(s string) string {
	return path.Clean(strings.TrimSpace(s))
}
