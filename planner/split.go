package planner

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// Strategy is how a task was split.
type Strategy string

// Split strategies, chosen by the dominant normalized component.
const (
	// StrategyFiles groups the files by directory (dominant file_scope).
	StrategyFiles Strategy = "files"
	// StrategyLayers separates data, business and presentation files, chained
	// in that order (dominant cross_file_deps).
	StrategyLayers Strategy = "layers"
	// StrategyCriteria divides the acceptance criteria (dominant
	// semantic_complexity or requirement_uncertainty).
	StrategyCriteria Strategy = "criteria"
)

// maxParts is the most parts one split produces: the letters a to z.
const maxParts = 26

// Split records one auto-split: TaskID (an original task, or a part split
// again) became Parts using Strategy. Complexity is TaskID's score before
// the split.
type Split struct {
	TaskID     string     `json:"task_id"`
	Strategy   Strategy   `json:"strategy"`
	Complexity Complexity `json:"complexity"`
	Parts      []string   `json:"parts"`
}

// splitter splits tasks recursively and records what it did.
type splitter struct {
	r        *resolved
	ids      map[string]bool     // every task ID in use
	children map[string][]string // split task ID -> its immediate parts
	splits   []Split
	warnings []string
}

// split appends the leaves of t to out: t itself when it needs no split or
// cannot be split, else the leaves of its parts. t must already be scored.
func (s *splitter) split(t Task, out []Task) ([]Task, error) {
	th := s.r.limits.ComplexityThreshold
	if t.Complexity.Total <= th {
		return append(out, t), nil
	}
	if !s.r.limits.AutoSplit {
		s.warnings = append(s.warnings, fmt.Sprintf("%s: complexity %.2f (%s) is above complexity_threshold %g and auto_split is off",
			t.ID, t.Complexity.Total, t.Complexity.Level, th))
		return append(out, t), nil
	}
	strategy, parts := s.r.splitOnce(&t)
	if len(parts) < 2 {
		s.warnings = append(s.warnings, fmt.Sprintf("%s: complexity %.2f (%s) is above complexity_threshold %g but the task cannot be split further",
			t.ID, t.Complexity.Total, t.Complexity.Level, th))
		return append(out, t), nil
	}
	rec := Split{TaskID: t.ID, Strategy: strategy, Complexity: t.Complexity, Parts: make([]string, 0, len(parts))}
	for i := range parts {
		p := &parts[i]
		if s.ids[p.ID] {
			return nil, fmt.Errorf("auto-split of %q: part ID %q is already used by another task; rename that task", t.ID, p.ID)
		}
		s.ids[p.ID] = true
		rec.Parts = append(rec.Parts, p.ID)
	}
	s.splits = append(s.splits, rec)
	s.children[t.ID] = rec.Parts
	var err error
	for i := range parts {
		parts[i].Complexity = s.r.score(&parts[i])
		if out, err = s.split(parts[i], out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// splitOnce tries the strategies from the most dominant normalized
// component down (ties in the order file_scope, cross_file_deps,
// semantic_complexity, requirement_uncertainty) and returns the first that
// yields at least two parts.
func (r *resolved) splitOnce(t *Task) (Strategy, []Task) {
	dom := dominance(t.Complexity)
	order := []int{0, 1, 2, 3}
	sort.SliceStable(order, func(i, j int) bool { return dom[order[i]] > dom[order[j]] })
	tried := map[Strategy]bool{}
	for _, c := range order {
		st := [4]Strategy{StrategyFiles, StrategyLayers, StrategyCriteria, StrategyCriteria}[c]
		if tried[st] {
			continue
		}
		tried[st] = true
		var parts []Task
		switch st {
		case StrategyFiles:
			parts = r.splitByFiles(t)
		case StrategyLayers:
			parts = r.splitByLayers(t)
		case StrategyCriteria:
			parts = r.splitByCriteria(t)
		}
		if len(parts) >= 2 {
			return st, parts
		}
	}
	return "", nil
}

// fileGroup is the set of work files one part gets, with the words that
// link a criterion to it.
type fileGroup struct {
	files []string
	label string
	words map[string]bool
	// layerWords are the words of the group's layer (layers strategy).
	layerWords map[string]bool
}

func (r *resolved) splitByFiles(t *Task) []Task {
	files := workFiles(t)
	if len(files) < 2 {
		return nil
	}
	byDir := map[string][]string{}
	var dirs []string
	for _, f := range files {
		d := path.Dir(f)
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], f)
	}
	sort.Strings(dirs)
	var groups []fileGroup
	if len(dirs) == 1 {
		half := (len(files) + 1) / 2
		groups = []fileGroup{{files: files[:half]}, {files: files[half:]}}
	} else {
		for _, d := range dirs {
			groups = append(groups, fileGroup{files: byDir[d]})
		}
		k := min(len(groups), maxParts, max(2, len(t.AcceptanceCriteria)))
		for len(groups) > k {
			best := 0
			for i := 1; i+1 < len(groups); i++ {
				if len(groups[i].files)+len(groups[i+1].files) < len(groups[best].files)+len(groups[best+1].files) {
					best = i
				}
			}
			merged := fileGroup{files: append(append([]string{}, groups[best].files...), groups[best+1].files...)}
			groups = append(groups[:best], append([]fileGroup{merged}, groups[best+2:]...)...)
		}
	}
	count := map[string]int{}
	for i := range groups {
		g := &groups[i]
		g.words = pathWords(g.files)
		g.label = commonDir(g.files)
		if g.label == "." {
			g.label = "top level"
		}
		count[g.label]++
	}
	for i := range groups {
		if g := &groups[i]; count[g.label] > 1 {
			g.label = fmt.Sprintf("%s, part %d of %d", g.label, i+1, len(groups))
		}
	}
	return r.partsFromGroups(t, groups)
}

func (r *resolved) splitByLayers(t *Task) []Task {
	files := workFiles(t)
	byLayer := map[layer][]string{}
	for _, f := range files {
		l := r.kw.layerOf(f)
		if l == layerNone {
			l = layerBusiness
		}
		byLayer[l] = append(byLayer[l], f)
	}
	if len(byLayer) < 2 {
		return nil
	}
	var groups []fileGroup
	for _, l := range []layer{layerData, layerBusiness, layerPresentation} {
		fs, ok := byLayer[l]
		if !ok {
			continue
		}
		w := pathWords(fs)
		w[l.String()] = true
		groups = append(groups, fileGroup{files: fs, label: l.String() + " layer", words: w, layerWords: r.kw.byLayer[l]})
	}
	return r.partsFromGroups(t, groups)
}

// partsFromGroups builds one part per file group. Each criterion goes to the
// group whose words it shares most; criteria that share none go to the part
// with the fewest criteria so far (the earliest on a tie).
func (r *resolved) partsFromGroups(t *Task, groups []fileGroup) []Task {
	crit := make([][]string, len(groups))
	var unmatched []string
	for _, c := range t.AcceptanceCriteria {
		cw := textWords(c)
		best, bestScore := -1, 0
		for i, g := range groups {
			n := 0
			for w := range cw {
				if g.words[w] || g.layerWords[w] {
					n++
				}
			}
			if n > bestScore {
				best, bestScore = i, n
			}
		}
		if best < 0 {
			unmatched = append(unmatched, c)
			continue
		}
		crit[best] = append(crit[best], c)
	}
	for _, c := range unmatched {
		best := 0
		for i := range crit {
			if len(crit[i]) < len(crit[best]) {
				best = i
			}
		}
		crit[best] = append(crit[best], c)
	}
	// Restore the original order of the criteria within each part.
	pos := make(map[string]int, len(t.AcceptanceCriteria))
	for i, c := range t.AcceptanceCriteria {
		pos[c] = i
	}
	create := toSet(t.FilesToCreate)
	parts := make([]Task, len(groups))
	for i, g := range groups {
		sort.SliceStable(crit[i], func(a, b int) bool { return pos[crit[i][a]] < pos[crit[i][b]] })
		p := r.newPart(t, i, len(groups), g.label)
		p.AcceptanceCriteria = nonNil(crit[i])
		for _, f := range g.files {
			if create[f] {
				p.FilesToCreate = append(p.FilesToCreate, f)
			} else {
				p.FilesToModify = append(p.FilesToModify, f)
			}
		}
		parts[i] = p
	}
	assignTestFiles(t, parts)
	return parts
}

func (r *resolved) splitByCriteria(t *Task) []Task {
	n := len(t.AcceptanceCriteria)
	if n < 2 {
		return nil
	}
	th := math.Max(r.limits.ComplexityThreshold, 1)
	k := min(n, maxParts, max(2, int(math.Ceil(t.Complexity.Total/th))))
	parts := make([]Task, k)
	at := 0
	for i := range k {
		size := n / k
		if i < n%k {
			size++
		}
		p := r.newPart(t, i, k, "")
		p.AcceptanceCriteria = append([]string{}, t.AcceptanceCriteria[at:at+size]...)
		at += size
		parts[i] = p
	}
	// A work file goes to the parts whose criteria mention it, or to every
	// part when none does. The first of those creates a file to create; the
	// later ones modify it.
	create := toSet(t.FilesToCreate)
	for _, f := range workFiles(t) {
		var in []int
		for i := range parts {
			if mentions(parts[i].AcceptanceCriteria, f) {
				in = append(in, i)
			}
		}
		if len(in) == 0 {
			in = make([]int, len(parts))
			for i := range in {
				in[i] = i
			}
		}
		for j, i := range in {
			if create[f] && j == 0 {
				parts[i].FilesToCreate = append(parts[i].FilesToCreate, f)
			} else {
				parts[i].FilesToModify = append(parts[i].FilesToModify, f)
			}
		}
	}
	assignTestFiles(t, parts)
	return parts
}

// newPart makes part i of n of t, without criteria or files.
func (r *resolved) newPart(t *Task, i, n int, label string) Task {
	root := t.SplitFrom
	if root == "" {
		root = t.ID
	}
	var deps []string
	if i == 0 {
		deps = append([]string{}, t.Dependencies...)
	} else {
		deps = []string{partID(t.ID, i-1)}
	}
	if label == "" {
		label = fmt.Sprintf("part %d of %d", i+1, n)
	}
	return Task{
		ID:            partID(t.ID, i),
		Title:         partTitle(t.Title, label),
		UserStory:     t.UserStory,
		FilesToCreate: []string{},
		FilesToModify: []string{},
		TestFiles:     []string{},
		Dependencies:  deps,
		MilestoneID:   t.MilestoneID,
		Priority:      t.Priority,
		Status:        StatusPending,
		MaxAttempts:   t.MaxAttempts,
		SplitFrom:     root,
	}
}

func partID(id string, i int) string { return id + "-" + string(rune('a'+i)) }

// partTitle appends " [label]" to title, shortening title with "…" to stay
// within MaxTitleLen.
func partTitle(title, label string) string {
	suffix := " [" + label + "]"
	room := MaxTitleLen - utf8.RuneCountInString(suffix)
	if room < 8 {
		suffix = ""
		room = MaxTitleLen
	}
	if utf8.RuneCountInString(title) > room {
		rs := []rune(title)
		title = strings.TrimSpace(string(rs[:room-1])) + "…"
	}
	return title + suffix
}

// assignTestFiles gives every test file of t to at least one part: the parts
// that create or modify it if any; else the parts with a work file of the
// same stem (a_test.go, test_a.py, a.test.ts → a); else the parts with a
// work file in its directory; else the parts whose criteria mention it;
// else the last part, which completes the task.
func assignTestFiles(t *Task, parts []Task) {
	for _, tf := range t.TestFiles {
		in := matchParts(parts, func(p *Task) bool { return containsStr(p.FilesToCreate, tf) || containsStr(p.FilesToModify, tf) })
		if len(in) == 0 {
			stem := testStem(tf)
			in = matchParts(parts, func(p *Task) bool {
				for _, f := range workFiles(p) {
					if testStem(f) == stem {
						return true
					}
				}
				return false
			})
		}
		if len(in) == 0 {
			dir := path.Dir(tf)
			in = matchParts(parts, func(p *Task) bool {
				for _, f := range workFiles(p) {
					if path.Dir(f) == dir {
						return true
					}
				}
				return false
			})
		}
		if len(in) == 0 {
			in = matchParts(parts, func(p *Task) bool { return mentions(p.AcceptanceCriteria, tf) })
		}
		if len(in) == 0 {
			in = []int{len(parts) - 1}
		}
		for _, i := range in {
			parts[i].TestFiles = append(parts[i].TestFiles, tf)
		}
	}
}

func matchParts(parts []Task, ok func(*Task) bool) []int {
	var in []int
	for i := range parts {
		if ok(&parts[i]) {
			in = append(in, i)
		}
	}
	return in
}

// testStem strips the directory, extension and test markers from a file
// name.
func testStem(f string) string {
	b := strings.ToLower(path.Base(f))
	if i := strings.IndexByte(b, '.'); i > 0 {
		b = b[:i]
	}
	b = strings.TrimPrefix(b, "test_")
	for _, s := range []string{"_test", "_spec", "-test", "-spec"} {
		b = strings.TrimSuffix(b, s)
	}
	return b
}

// mentions reports whether any criterion names f by its path or base name.
func mentions(criteria []string, f string) bool {
	lf, base := strings.ToLower(f), strings.ToLower(path.Base(f))
	for _, c := range criteria {
		lc := strings.ToLower(c)
		if strings.Contains(lc, lf) || strings.Contains(lc, base) {
			return true
		}
	}
	return false
}

// pathWords returns the lowercased words of the files' directories and
// names, plus each base name.
func pathWords(files []string) map[string]bool {
	w := map[string]bool{}
	for _, f := range files {
		lf := strings.ToLower(f)
		w[path.Base(lf)] = true
		for _, s := range splitWords(lf) {
			if len(s) > 1 {
				w[s] = true
			}
		}
	}
	// File extensions are not meaningful words.
	for _, ext := range []string{"go", "py", "ts", "js", "rs", "java", "rb", "md", "json", "yaml", "yml", "txt"} {
		delete(w, ext)
	}
	return w
}

// textWords returns the lowercased words of s, plus its file-like tokens.
func textWords(s string) map[string]bool {
	w := map[string]bool{}
	for _, f := range strings.Fields(strings.ToLower(s)) {
		w[strings.Trim(f, ".,;:!?()[]{}\"'`")] = true
	}
	for _, f := range splitWords(strings.ToLower(s)) {
		w[f] = true
	}
	return w
}

// commonDir returns the deepest directory shared by files, or "." .
func commonDir(files []string) string {
	if len(files) == 0 {
		return "."
	}
	d := path.Dir(files[0])
	for _, f := range files[1:] {
		for d != "." && d != "/" && path.Dir(f) != d && !strings.HasPrefix(path.Dir(f), d+"/") {
			d = path.Dir(d)
		}
	}
	return d
}

func toSet(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}

func containsStr(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
