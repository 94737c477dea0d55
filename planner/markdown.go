package planner

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// DefaultProductName names the PRODUCT.md in markdown errors and warnings
// ("PRODUCT.md:12: …") when no other name is given.
const DefaultProductName = "PRODUCT.md"

const bom = "\ufeff"

// normalizeText removes a UTF-8 byte order mark and turns CRLF (and lone CR)
// line ends into LF.
func normalizeText(s string) string {
	s = strings.TrimPrefix(s, bom)
	if strings.Contains(s, "\r") {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		s = strings.ReplaceAll(s, "\r", "\n")
	}
	return s
}

var (
	milestoneHeading = regexp.MustCompile(`^##\s+Milestone\s+([^\s:]+)\s*:\s*(.*?)\s*$`)
	taskHeading      = regexp.MustCompile(`^###\s+Task\s+([^\s:]+)\s*:\s*(.*?)\s*$`)
	anyHeading       = regexp.MustCompile(`^#{1,6}\s`)
	keyBullet        = regexp.MustCompile(`^ ?[-*+]\s+(?:\[[ xX]\]\s+)?([A-Za-z_ ]+?)\s*:\s*(.*?)\s*$`)
	topBullet        = regexp.MustCompile(`^ ?[-*+]\s+`)
	nestedBullet     = regexp.MustCompile(`^(?:\s{2,}|\t)[-*+]\s+(?:\[[ xX]\]\s+)?(.*?)\s*$`)
	checkbox         = regexp.MustCompile(`^\[[ xX]\]\s+`)
	closingHashes    = regexp.MustCompile(`\s+#+\s*$`)

	// Near-miss task headings: "Task T1 - title", "task t1: title" (any
	// case, any separator), "Task: T1 title", "Task T1 title" and "T1:
	// title" (no "Task"). The ID must contain a digit.
	headingText  = regexp.MustCompile(`^(#{1,6})\s*(.*?)\s*$`)
	nearTaskWord = regexp.MustCompile(`(?i)^task(?:\s*[:#.-]\s*|\s+)#?([A-Za-z0-9]+(?:[_.-][A-Za-z0-9]+)*)(?:\s*(?:[:.)]|\s[-\x{2013}\x{2014}])\s*(.*?)|\s+(.*?))?\s*$`)
	nearTaskID   = regexp.MustCompile(`^([A-Za-z]{1,5}[-_]?\d+(?:[_.-][A-Za-z0-9]+)*)\s*(?:[:.)]|\s[-\x{2013}\x{2014}])\s*(.+?)\s*$`)
)

// stripCheckbox removes a leading "[ ] " or "[x] " from a list item.
func stripCheckbox(s string) string {
	return checkbox.ReplaceAllString(s, "")
}

// nearTask reports whether a heading line looks like a task heading that
// does not follow "### Task ID: title". ok is true for such a heading;
// parse is true when it can be read as a task unambiguously (a "###"
// heading with an ID and a title).
func nearTask(line string) (id, title string, ok, parse bool) {
	if taskHeading.MatchString(line) {
		return "", "", false, false
	}
	h := headingText.FindStringSubmatch(line)
	if h == nil || !anyHeading.MatchString(line) {
		return "", "", false, false
	}
	level, text := len(h[1]), plainHeading(h[2])
	if m := nearTaskWord.FindStringSubmatch(text); m != nil && strings.ContainsAny(m[1], "0123456789") {
		id, title = m[1], m[2]+m[3]
	} else if m := nearTaskID.FindStringSubmatch(text); m != nil && level >= 3 {
		id, title = m[1], m[2]
	} else {
		return "", "", false, false
	}
	return id, title, true, level == 3 && title != ""
}

var (
	headingMarkup   = strings.NewReplacer("**", "", "__", "", "`", "")
	headingNumber   = regexp.MustCompile(`^\d+[.)]\s+`)
	headingBrackets = regexp.MustCompile(`^\[([^\]\s]+)\]\s*[:.-]?\s*`)
)

// plainHeading is a heading's text without the markup a writer (or a
// model) puts around a task's ID: bold, code, a number in front, the ID
// in brackets. "**Task T2**: x", "2. Task T2: x" and "[T2] x" read as
// "Task T2: x" and "T2: x".
func plainHeading(text string) string {
	text = headingNumber.ReplaceAllString(headingMarkup.Replace(text), "")
	return headingBrackets.ReplaceAllString(text, "$1: ")
}

// HasTaskList reports whether a PRODUCT.md contains an explicit task list:
// at least one "### Task ID: title" heading outside code fences, or a
// near-miss task heading that reads as one ("### T1: title", "### task t1 -
// title") under a "## Milestone ID: name" heading.
func HasTaskList(productMD string) bool {
	fenced, inMilestone := false, false
	for _, line := range strings.Split(normalizeText(productMD), "\n") {
		if isFence(line) {
			fenced = !fenced
			continue
		}
		if fenced || !anyHeading.MatchString(line) {
			continue
		}
		if taskHeading.MatchString(line) {
			return true
		}
		if milestoneHeading.MatchString(line) {
			inMilestone = true
			continue
		}
		if _, _, _, parse := nearTask(line); parse && inMilestone {
			return true
		}
		if strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "# ") {
			inMilestone = false
		}
	}
	return false
}

// TaskHeadingWarnings lists the headings of a PRODUCT.md without an
// explicit task list (see HasTaskList) that look like task headings, each
// naming its line, so that they do not go to the model unnoticed.
func TaskHeadingWarnings(name, productMD string) []string {
	if name == "" {
		name = DefaultProductName
	}
	var out []string
	for _, h := range nearTaskHeadings(productMD) {
		out = append(out, fmt.Sprintf("%s:%d: heading %q looks like a task but is not read as one (an explicit task list needs \"### Task ID: title\" under \"## Milestone ID: name\"); the whole file goes to the model", name, h.line, h.text))
	}
	return out
}

// NeedsModel is the error of a PRODUCT.md without an explicit task list
// when no model can be had (err says why): the breakdown needs one. The
// headings that look like tasks are named by their lines, since they are
// often why the list was not read.
func NeedsModel(name, productMD string, err error) error {
	if strings.TrimSpace(normalizeText(productMD)) == "" {
		return ErrEmpty(name)
	}
	if name == "" {
		name = DefaultProductName
	}
	why := ""
	if hs := nearTaskHeadings(productMD); len(hs) > 0 {
		lines := make([]string, len(hs))
		for i, h := range hs {
			lines[i] = fmt.Sprintf("%s:%d", name, h.line)
		}
		why = fmt.Sprintf(" (%s look like task headings, but a task list needs \"### Task ID: title\" under \"## Milestone ID: name\")", strings.Join(lines, ", "))
	}
	return fmt.Errorf("%s has no explicit task list%s, so the breakdown needs a model: %w", name, why, err)
}

// ErrEmpty is the error of a PRODUCT.md with nothing in it: there is
// nothing to break down, with a model or without.
func ErrEmpty(name string) error {
	if name == "" {
		name = DefaultProductName
	}
	return fmt.Errorf("%s is empty: write the product spec in it, or a task list (\"## Milestone M1: name\", then \"### Task T1: title\" with its fields)", name)
}

type heading struct {
	line int
	text string
}

// nearTaskHeadings returns the headings outside code fences that look like
// task headings without being ones.
func nearTaskHeadings(productMD string) []heading {
	var out []heading
	fenced := false
	for i, line := range strings.Split(normalizeText(productMD), "\n") {
		if isFence(line) {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if _, _, ok, _ := nearTask(line); ok {
			out = append(out, heading{i + 1, strings.TrimSpace(line)})
		}
	}
	return out
}

func isFence(line string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")
}

// ParseTaskList parses the explicit task list of a PRODUCT.md (the format
// is in the README) into raw tasks and validates them, as
// ParseTaskListFile with DefaultProductName.
func ParseTaskList(productMD string) (*RawPlan, error) {
	return ParseTaskListFile(DefaultProductName, productMD)
}

// ParseTaskListFile parses the explicit task list of the PRODUCT.md called
// name. A byte order mark and CRLF line ends are accepted, and checkboxes
// ("- [ ] …") are dropped from list items. Every problem, schema problems
// included, names its line ("PRODUCT.md:12: …"). Near-miss task headings
// are read as tasks where unambiguous, with a warning in RawPlan.Warnings,
// and are otherwise reported as a warning naming their line.
func ParseTaskListFile(name, productMD string) (*RawPlan, error) {
	if name == "" {
		name = DefaultProductName
	}
	p := &mdParser{raw: &RawPlan{}, name: name, lines: map[string]int{}}
	for i, line := range strings.Split(normalizeText(productMD), "\n") {
		p.line(i+1, line)
	}
	if len(p.issues) > 0 {
		return nil, &ValidationError{Issues: p.issues}
	}
	for i := range p.raw.Milestones {
		p.raw.Milestones[i].Description = strings.TrimSpace(p.raw.Milestones[i].Description)
	}
	if issues := p.raw.validate(); len(issues) > 0 {
		for i := range issues {
			issues[i] = p.locate(issues[i])
		}
		return nil, &ValidationError{Issues: issues}
	}
	p.raw.Lines = p.sourceLines()
	return p.raw, nil
}

var schemaPath = regexp.MustCompile(`^(tasks|milestones)\[(\d+)\](?:\.([a-z_]+)(?:\[(\d+)\])?)?$`)

// locate turns a schema issue's JSON path into the line of the markdown it
// comes from: the list item, else its key, else the heading.
func (p *mdParser) locate(is Issue) Issue {
	m := schemaPath.FindStringSubmatch(is.Path)
	if m == nil {
		return Issue{Path: p.name, Msg: is.Path + ": " + is.Msg}
	}
	prefix := m[1] + "[" + m[2] + "]"
	line := p.lines[prefix]
	if m[3] != "" {
		if n, ok := p.lines[prefix+"."+m[3]]; ok {
			line = n
		}
		if m[4] != "" {
			if n, ok := p.lines[prefix+"."+m[3]+"["+m[4]+"]"]; ok {
				line = n
			}
		}
	}
	what := ""
	i, _ := strconv.Atoi(m[2])
	if m[1] == "tasks" && i < len(p.raw.Tasks) {
		what = "task " + p.raw.Tasks[i].ID
	} else if m[1] == "milestones" && i < len(p.raw.Milestones) {
		what = "milestone " + p.raw.Milestones[i].ID
	}
	if m[3] != "" {
		what += " " + m[3]
	}
	loc := p.name
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", p.name, line)
	}
	// Another task named by its JSON path ("also tasks[0]") is named by
	// its line, as the issue itself is.
	msg := taskRef.ReplaceAllStringFunc(is.Msg, func(ref string) string {
		if n := p.lines[ref]; n > 0 {
			return fmt.Sprintf("%s:%d", p.name, n)
		}
		return ref
	})
	return Issue{Path: loc, Msg: what + ": " + msg}
}

var taskRef = regexp.MustCompile(`tasks\[\d+\]`)

type mdParser struct {
	raw       *RawPlan
	issues    []Issue
	fenced    bool
	milestone *RawMilestone // current milestone, nil outside one
	task      *RawTask      // current task, nil outside one
	listKey   string        // list key that nested bullets add to
	lineNo    int
	name      string         // the PRODUCT.md's name in issues
	lines     map[string]int // JSON path -> line, for schema issues
}

func (p *mdParser) add(format string, args ...any) {
	p.issues = append(p.issues, Issue{Path: fmt.Sprintf("%s:%d", p.name, p.lineNo), Msg: fmt.Sprintf(format, args...)})
}

func (p *mdParser) warn(format string, args ...any) {
	p.raw.Warnings = append(p.raw.Warnings, fmt.Sprintf("%s:%d: ", p.name, p.lineNo)+fmt.Sprintf(format, args...))
}

// taskPath is the JSON path of the current task.
func (p *mdParser) taskPath() string {
	return fmt.Sprintf("tasks[%d]", len(p.raw.Tasks)-1)
}

const markdownKeys = "user_story, priority, acceptance_criteria, files_to_create, files_to_modify, test_files, dependencies, estimated_minutes"

var listKeys = map[string]bool{
	"acceptance_criteria": true, "files_to_create": true, "files_to_modify": true,
	"test_files": true, "dependencies": true,
}

func (p *mdParser) line(n int, line string) {
	p.lineNo = n
	if isFence(line) {
		p.fenced = !p.fenced
		return
	}
	if p.fenced {
		return
	}
	if anyHeading.MatchString(line) {
		// A heading may end with a run of "#" that closes it, as in
		// CommonMark: it is no part of its title.
		line = closingHashes.ReplaceAllString(line, "")
	}
	if m := milestoneHeading.FindStringSubmatch(line); m != nil {
		p.raw.Milestones = append(p.raw.Milestones, RawMilestone{ID: m[1], Name: m[2]})
		p.milestone = &p.raw.Milestones[len(p.raw.Milestones)-1]
		p.lines[fmt.Sprintf("milestones[%d]", len(p.raw.Milestones)-1)] = n
		p.task, p.listKey = nil, ""
		return
	}
	m := taskHeading.FindStringSubmatch(line)
	if m == nil {
		if id, title, ok, parse := nearTask(line); ok {
			if !parse {
				p.warn("heading %q looks like a task but is not read as one (write \"### Task %s: title\")", strings.TrimSpace(line), id)
			} else {
				m = []string{line, id, title}
				if p.milestone != nil {
					p.warn("read heading %q as \"### Task %s: %s\"", strings.TrimSpace(line), id, title)
				}
			}
		}
	}
	if m != nil {
		p.listKey = ""
		if p.milestone == nil {
			p.task = nil
			p.add("task %s is not under a \"## Milestone ID: name\" heading", m[1])
			return
		}
		p.raw.Tasks = append(p.raw.Tasks, RawTask{ID: m[1], Title: m[2], MilestoneID: p.milestone.ID})
		p.task = &p.raw.Tasks[len(p.raw.Tasks)-1]
		p.lines[p.taskPath()] = n
		return
	}
	if anyHeading.MatchString(line) {
		// Any other heading ends the current task; a "##" one also ends the
		// milestone.
		p.task, p.listKey = nil, ""
		if strings.HasPrefix(line, "## ") || strings.HasPrefix(line, "# ") {
			p.milestone = nil
		}
		return
	}
	if strings.TrimSpace(line) == "" {
		return
	}
	switch {
	case p.task != nil:
		p.taskLine(line)
	case p.milestone != nil:
		if m := keyBullet.FindStringSubmatch(line); m != nil && normKey(m[1]) == "description" {
			p.milestone.Description += " " + m[2]
			return
		}
		p.milestone.Description += " " + strings.TrimSpace(line)
	}
	// Text outside milestones is the product description: ignored.
}

func normKey(k string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(k)), " ", "_")
}

func (p *mdParser) taskLine(line string) {
	t := p.task
	if m := nestedBullet.FindStringSubmatch(line); m != nil {
		if p.listKey == "" {
			p.add("nested item %q in task %s does not follow a list key (acceptance_criteria, files_to_create, files_to_modify, test_files, dependencies)", m[1], t.ID)
			return
		}
		p.appendItem(p.listKey, stripCheckbox(m[1]))
		return
	}
	m := keyBullet.FindStringSubmatch(line)
	if m == nil {
		if topBullet.MatchString(line) {
			p.add("expected \"- key: value\" in task %s, got %q", t.ID, strings.TrimSpace(line))
		} else {
			p.add("unexpected text in task %s: %q (task fields are \"- key: value\" items)", t.ID, strings.TrimSpace(line))
		}
		return
	}
	key, val := normKey(m[1]), m[2]
	p.listKey = ""
	p.lines[p.taskPath()+"."+key] = p.lineNo
	if listKeys[key] {
		p.listKey = key
		p.setList(key)
		if val == "" || strings.EqualFold(val, "none") || val == "-" {
			return
		}
		if key == "acceptance_criteria" {
			p.appendItem(key, stripCheckbox(val))
			return
		}
		for _, item := range strings.Split(val, ",") {
			if item = strings.TrimSpace(item); item != "" {
				p.appendItem(key, item)
			}
		}
		return
	}
	switch key {
	case "user_story":
		t.UserStory = val
	case "priority":
		t.Priority = Priority(strings.ToLower(val))
	case "estimated_minutes":
		f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(val), " min"), 64)
		if err != nil {
			p.add("estimated_minutes of task %s must be a number, got %q", t.ID, val)
			return
		}
		t.EstimatedMinutes = &f
	default:
		p.add("unknown key %q in task %s (allowed: %s)", m[1], t.ID, markdownKeys)
	}
}

// setList makes sure the list exists (an empty list, not a missing one).
func (p *mdParser) setList(key string) {
	if l := p.list(key); *l == nil {
		*l = []string{}
	}
}

func (p *mdParser) list(key string) *[]string {
	t := p.task
	switch key {
	case "acceptance_criteria":
		return &t.AcceptanceCriteria
	case "files_to_create":
		return &t.FilesToCreate
	case "files_to_modify":
		return &t.FilesToModify
	case "test_files":
		return &t.TestFiles
	}
	return &t.Dependencies
}

func (p *mdParser) appendItem(key, item string) {
	if key != "acceptance_criteria" {
		item = strings.Trim(item, "`")
	}
	l := p.list(key)
	p.lines[fmt.Sprintf("%s.%s[%d]", p.taskPath(), key, len(*l))] = p.lineNo
	*l = append(*l, item)
}
