package planner

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

var (
	milestoneHeading = regexp.MustCompile(`^##\s+Milestone\s+([^\s:]+)\s*:\s*(.*?)\s*$`)
	taskHeading      = regexp.MustCompile(`^###\s+Task\s+([^\s:]+)\s*:\s*(.*?)\s*$`)
	anyHeading       = regexp.MustCompile(`^#{1,6}\s`)
	keyBullet        = regexp.MustCompile(`^ ?[-*]\s+([A-Za-z_ ]+?)\s*:\s*(.*?)\s*$`)
	topBullet        = regexp.MustCompile(`^ ?[-*]\s+`)
	nestedBullet     = regexp.MustCompile(`^(?:\s{2,}|\t)[-*]\s+(.*?)\s*$`)
)

// HasTaskList reports whether a PRODUCT.md contains an explicit task list:
// at least one "### Task ID: title" heading outside code fences.
func HasTaskList(productMD string) bool {
	fenced := false
	for _, line := range strings.Split(productMD, "\n") {
		if isFence(line) {
			fenced = !fenced
			continue
		}
		if !fenced && taskHeading.MatchString(strings.TrimRight(line, "\r")) {
			return true
		}
	}
	return false
}

func isFence(line string) bool {
	t := strings.TrimSpace(line)
	return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")
}

// ParseTaskList parses the explicit task list of a PRODUCT.md (the format
// is in the README) into raw tasks and validates them. Markdown problems are
// reported as "line N"; schema problems with their JSON path, as for raw
// tasks JSON.
func ParseTaskList(productMD string) (*RawPlan, error) {
	p := &mdParser{raw: &RawPlan{}}
	for i, line := range strings.Split(productMD, "\n") {
		p.line(i+1, strings.TrimRight(line, "\r"))
	}
	if len(p.issues) > 0 {
		return nil, &ValidationError{Issues: p.issues}
	}
	for i := range p.raw.Milestones {
		p.raw.Milestones[i].Description = strings.TrimSpace(p.raw.Milestones[i].Description)
	}
	if err := p.raw.Validate(); err != nil {
		return nil, err
	}
	return p.raw, nil
}

type mdParser struct {
	raw       *RawPlan
	issues    []Issue
	fenced    bool
	milestone *RawMilestone // current milestone, nil outside one
	task      *RawTask      // current task, nil outside one
	listKey   string        // list key that nested bullets add to
	lineNo    int
}

func (p *mdParser) add(format string, args ...any) {
	p.issues = append(p.issues, Issue{Path: fmt.Sprintf("line %d", p.lineNo), Msg: fmt.Sprintf(format, args...)})
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
	if m := milestoneHeading.FindStringSubmatch(line); m != nil {
		p.raw.Milestones = append(p.raw.Milestones, RawMilestone{ID: m[1], Name: m[2]})
		p.milestone = &p.raw.Milestones[len(p.raw.Milestones)-1]
		p.task, p.listKey = nil, ""
		return
	}
	if m := taskHeading.FindStringSubmatch(line); m != nil {
		p.listKey = ""
		if p.milestone == nil {
			p.task = nil
			p.add("task %s is not under a \"## Milestone ID: name\" heading", m[1])
			return
		}
		p.raw.Tasks = append(p.raw.Tasks, RawTask{ID: m[1], Title: m[2], MilestoneID: p.milestone.ID})
		p.task = &p.raw.Tasks[len(p.raw.Tasks)-1]
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
		p.appendItem(p.listKey, m[1])
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
	if listKeys[key] {
		p.listKey = key
		p.setList(key)
		if val == "" || strings.EqualFold(val, "none") || val == "-" {
			return
		}
		if key == "acceptance_criteria" {
			p.appendItem(key, val)
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
	*l = append(*l, item)
}
