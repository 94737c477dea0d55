package planner

import (
	"fmt"
	"math"
	"path"
	"regexp"
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
	ix       *repoIndex
	ids      map[string]bool     // every task ID in use
	children map[string][]string // split task ID -> its immediate parts
	splits   []Split
	warnings []string
	// titles holds the title of every split raw task and labels the label
	// of every part, so that a part split again gets one label made of
	// both, not a nested title.
	titles map[string]string
	labels map[string]string
}

func newSplitter(r *resolved) *splitter {
	return &splitter{r: r, ix: newRepoIndex(r.repo), ids: map[string]bool{}, children: map[string][]string{},
		titles: map[string]string{}, labels: map[string]string{}}
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
	strategy, parts := s.splitOnce(&t)
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
// component down (ties in the order cross_file_deps, file_scope,
// semantic_complexity, requirement_uncertainty: layers, then files, then
// criteria) and returns the first that yields at least two parts.
func (s *splitter) splitOnce(t *Task) (Strategy, []Task) {
	dom := dominance(t.Complexity)
	order := []int{1, 0, 2, 3}
	sort.SliceStable(order, func(i, j int) bool { return dom[order[i]] > dom[order[j]] })
	us := s.units(t)
	if len(us) == 0 {
		// A part must have files: a task without any is not split.
		return "", nil
	}
	sc := s.scoreCriteria(t, us)
	tried := map[Strategy]bool{}
	for _, c := range order {
		st := [4]Strategy{StrategyFiles, StrategyLayers, StrategyCriteria, StrategyCriteria}[c]
		if tried[st] {
			continue
		}
		tried[st] = true
		if groups := s.groups(st, t, us, sc); len(groups) >= 2 {
			return st, s.parts(t, st, us, groups)
		}
	}
	return "", nil
}

// A unit is a file with its tests, which a split never separates; or the
// tests of a directory with no work file of the task.
type unit struct {
	work  string   // the work file, "" for tests alone
	files []string // work first, then its tests
	tier  int      // tierOf the unit's file, -1 for none
	rank  int      // tier, or tierNone
	// words are the stems of the words of its path, names the ways a
	// criterion names it (path, base name, compound name such as
	// "bookmarkhandler", the symbols it defines in the repository).
	words   map[string]bool
	base    string // the stem of a one-word base name ("search")
	names   map[string]bool
	symbols []string
}

// units gathers the task's files into units, ordered so that what is
// imported comes first: by the repository's imports where the files exist,
// else by tier, then in the task's order.
func (s *splitter) units(t *Task) []unit {
	var subjects, tests []string
	for _, f := range workFiles(t) {
		if IsTestFile(f) {
			tests = append(tests, f)
		} else {
			subjects = append(subjects, f)
		}
	}
	for _, f := range t.TestFiles {
		if !containsStr(tests, f) && !containsStr(subjects, f) {
			tests = append(tests, f)
		}
	}
	// Files of one stem in one directory (x.ts and x.tsx, a.py and
	// a.pyi) are one unit, with the same tests.
	var us []unit
	unitOf := make([]int, len(subjects))
	byStem := map[string]int{}
	for i, f := range subjects {
		k := path.Dir(f) + "/" + testStem(f)
		if j, ok := byStem[k]; ok {
			unitOf[i] = j
			us[j].files = append(us[j].files, f)
			continue
		}
		byStem[k], unitOf[i] = len(us), len(us)
		us = append(us, unit{work: f, files: []string{f}})
	}
	orphans := map[string]int{}
	for _, tf := range tests {
		if i := testSubject(tf, subjects); i >= 0 {
			us[unitOf[i]].files = append(us[unitOf[i]].files, tf)
			continue
		}
		d := path.Dir(tf)
		if i, ok := orphans[d]; ok {
			us[i].files = append(us[i].files, tf)
			continue
		}
		orphans[d] = len(us)
		us = append(us, unit{files: []string{tf}})
	}
	ks := s.r.kw
	for i := range us {
		u := &us[i]
		f := u.files[0]
		u.tier, u.rank = ks.tierOf(f), ks.rankOf(f)
		u.words, u.names = map[string]bool{}, map[string]bool{}
		dir, base := splitPath(f)
		base = strings.TrimSuffix(base, pathExt(base))
		for _, seg := range append(strings.Split(dir, "/"), base) {
			for _, w := range identWords(seg) {
				if !genericWords[w] {
					u.words[stem(w)] = true
				}
			}
		}
		if bw := identWords(base); len(bw) == 1 {
			u.base = stem(bw[0])
		}
		for _, g := range u.files {
			_, b := splitPath(g)
			u.names[strings.ToLower(g)] = true
			u.names[strings.ToLower(b)] = true
			if w := identWords(strings.TrimSuffix(b, pathExt(b))); len(w) >= 2 {
				u.names[strings.Join(w, "")] = true
			}
		}
		if u.work != "" {
			u.symbols = s.ix.symbolsOf(u.work)
		}
	}
	order := topoOrder(len(us), func(i, j int) bool { return s.unitImports(&us[j], &us[i]) },
		func(i, j int) bool { return us[i].rank < us[j].rank || (us[i].rank == us[j].rank && i < j) })
	sorted := make([]unit, len(us))
	for k, i := range order {
		sorted[k] = us[i]
	}
	return sorted
}

// genericWords say nothing about what a file is for.
var genericWords = map[string]bool{"src": true, "internal": true, "app": true, "test": true, "tests": true,
	"spec": true, "index": true, "init": true, "util": true, "utils": true, "common": true}

// unitImports reports whether a's work file imports b's.
func (s *splitter) unitImports(a, b *unit) bool {
	return a.work != "" && b.work != "" && s.ix.importsFile(a.work, b.work)
}

// testSubject returns the index of the file a test file tests: the one of
// the same stem in its directory, else the one of the same stem nearest to
// it (tests/test_a.py, __tests__/a.test.ts), else the first in its
// directory (a Go test of the package); or -1.
func testSubject(tf string, subjects []string) int {
	st, dir := testStem(tf), path.Dir(tf)
	best, bestLen := -1, -1
	for i, f := range subjects {
		if testStem(f) != st {
			continue
		}
		if path.Dir(f) == dir {
			return i
		}
		if n := commonPrefixLen(path.Dir(f), dir); n > bestLen {
			best, bestLen = i, n
		}
	}
	if best >= 0 {
		return best
	}
	for i, f := range subjects {
		if path.Dir(f) == dir {
			return i
		}
	}
	return -1
}

func commonPrefixLen(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
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

// critScores holds, for every criterion, its best unit (-1 when it shares
// nothing with any) and the units it names outright.
type critScores struct {
	best   []int
	strong [][]int
}

// Weights of the criterion-to-unit score.
const (
	scoreNamed    = 10  // the criterion names the file, a test of it or one of its symbols
	scoreBaseWord = 1   // the criterion uses the file's one-word base name
	scoreTierWord = 1.5 // per word of the file's tier in the criterion
)

var identToken = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// scoreCriteria finds the unit each criterion is most about. A criterion's
// score for a unit adds scoreNamed when it names the unit, scoreBaseWord
// when it uses its one-word base name, 1/n for every path word shared with
// the unit (n units have that word, so common words count little), and
// scoreTierWord for every word pointing at the unit's tier (tierTable).
// Ties go to the earlier unit.
func (s *splitter) scoreCriteria(t *Task, us []unit) critScores {
	df := map[string]int{}
	for i := range us {
		for w := range us[i].words {
			df[w]++
		}
	}
	present := make([]bool, len(tierTable))
	for i := range us {
		if us[i].tier >= 0 {
			present[us[i].tier] = true
		}
	}
	sc := critScores{best: make([]int, len(t.AcceptanceCriteria)), strong: make([][]int, len(t.AcceptanceCriteria))}
	for ci, c := range t.AcceptanceCriteria {
		tokens := map[string]bool{}
		for _, f := range strings.Fields(strings.ToLower(c)) {
			tokens[strings.Trim(f, ".,;:!?()[]{}\"'`")] = true
		}
		idents := identToken.FindAllString(c, -1)
		for _, id := range idents {
			tokens[strings.Join(identWords(id), "")] = true
		}
		words := map[string]bool{}
		for _, w := range identWords(c) {
			words[stem(w)] = true
		}
		tiers := s.r.kw.criterionTiers(c)
		shiftTiers(tiers, present)
		best, bestScore := -1, 0.0
		for ui := range us {
			u := &us[ui]
			score := 0.0
			named := false
			for n := range u.names {
				if tokens[n] {
					named = true
					break
				}
			}
			for _, sym := range u.symbols {
				if len(sym) >= 3 && containsStr(idents, sym) {
					named = true
					break
				}
			}
			if named {
				score += scoreNamed
				sc.strong[ci] = append(sc.strong[ci], ui)
			}
			if u.base != "" && words[u.base] {
				score += scoreBaseWord
			}
			for w := range u.words {
				if words[w] {
					score += 1 / float64(df[w])
				}
			}
			if u.tier >= 0 {
				score += scoreTierWord * tiers[u.tier]
			}
			if score > bestScore {
				best, bestScore = ui, score
			}
		}
		sc.best[ci] = best
	}
	return sc
}

// shiftTiers moves the score of each tier the task has no file of to the
// nearest tier it has (the later on a tie): "main wires …" is about the
// last part when there is no main.
func shiftTiers(tiers []float64, present []bool) {
	for i := range tiers {
		if tiers[i] == 0 || present[i] {
			continue
		}
		for d := 1; d < len(tiers); d++ {
			if i+d < len(tiers) && present[i+d] {
				tiers[i+d] += tiers[i]
				break
			}
			if i-d >= 0 && present[i-d] {
				tiers[i-d] += tiers[i]
				break
			}
		}
		tiers[i] = 0
	}
}

// group is the work of one part: units (indexes into the ordered units)
// and criteria (indexes into the task's criteria).
type group struct {
	units []int
	crit  []int
	// shared are units of other groups that its criteria name; they do
	// not order the groups.
	shared []int
}

// groups divides the units among the parts of strategy st and gives every
// criterion to the group of its best unit. It returns nil when the
// strategy makes fewer than two parts with criteria.
func (s *splitter) groups(st Strategy, t *Task, us []unit, sc critScores) []group {
	var gs []group
	switch st {
	case StrategyFiles:
		gs = groupBy(us, func(u *unit) string { return path.Dir(u.files[0]) })
		if len(gs) == 1 {
			gs = s.chunkUnits(us)
		}
	case StrategyLayers:
		// One group per tier first: a layer too large for one part keeps
		// its tiers apart (mergeLayers).
		if len(groupBy(us, func(u *unit) string { return tierLayer(u.rank).String() })) < 2 {
			return nil
		}
		gs = groupBy(us, func(u *unit) string { return tierTable[u.rank].name })
	case StrategyCriteria:
		gs = make([]group, len(us))
		for i := range us {
			gs[i] = group{units: []int{i}}
		}
	}
	if len(gs) < 2 && st != StrategyCriteria {
		return nil
	}
	assignCriteria(gs, sc, len(t.AcceptanceCriteria))
	gs = s.mergeEmpty(gs, us)
	if st == StrategyLayers {
		gs = s.mergeLayers(gs, us)
	}
	if st == StrategyCriteria && len(gs) < 2 {
		gs = s.chunkCriteria(t, us, sc)
	}
	gs = s.mergeToCap(gs, us, s.maxPartsFor(t))
	if len(gs) < 2 {
		return nil
	}
	// Units a criterion names go with it, even when another part owns them.
	for gi := range gs {
		for _, ci := range gs[gi].crit {
			for _, ui := range sc.strong[ci] {
				if !containsInt(gs[gi].units, ui) && !containsInt(gs[gi].shared, ui) {
					gs[gi].shared = append(gs[gi].shared, ui)
				}
			}
		}
		sort.Ints(gs[gi].units)
		sort.Ints(gs[gi].shared)
		sort.Ints(gs[gi].crit)
	}
	return s.orderGroups(gs, us)
}

// groupBy makes one group per key, in the order the keys first appear.
func groupBy(us []unit, key func(*unit) string) []group {
	index := map[string]int{}
	var gs []group
	for i := range us {
		k := key(&us[i])
		gi, ok := index[k]
		if !ok {
			gi = len(gs)
			index[k] = gi
			gs = append(gs, group{})
		}
		gs[gi].units = append(gs[gi].units, i)
	}
	return gs
}

// chunkUnits divides units of one directory into ⌈files / limit⌉ (at
// least two) runs, in order.
func (s *splitter) chunkUnits(us []unit) []group {
	if len(us) < 2 {
		return nil
	}
	files := 0
	for i := range us {
		files += len(us[i].files)
	}
	k := min(len(us), maxParts, max(2, ceilDiv(files, s.r.limits.MaxFilesToCreate)))
	gs := make([]group, k)
	for i := range us {
		gs[i*k/len(us)].units = append(gs[i*k/len(us)].units, i)
	}
	return gs
}

// chunkCriteria divides the criteria, in order, into max(2, ⌈n / limit⌉)
// runs, when they do not tell the units apart. Each run gets the units its
// criteria are most about; a run about none gets the first unit.
func (s *splitter) chunkCriteria(t *Task, us []unit, sc critScores) []group {
	n := len(t.AcceptanceCriteria)
	if n < 2 {
		return nil
	}
	k := min(n, maxParts, max(2, ceilDiv(n, s.r.limits.MaxCriteriaPerTask)))
	gs := make([]group, k)
	for ci := range n {
		g := &gs[ci*k/n]
		g.crit = append(g.crit, ci)
		if b := sc.best[ci]; b >= 0 && !containsInt(g.units, b) {
			g.units = append(g.units, b)
		}
	}
	owned := map[int]bool{}
	for gi := range gs {
		for _, u := range gs[gi].units {
			owned[u] = true
		}
	}
	for gi := range gs {
		if len(gs[gi].units) == 0 {
			gs[gi].units = []int{0}
			owned[0] = true
		}
	}
	for ui := range us {
		if !owned[ui] {
			gi := closestGroup(gs, us, us[ui].rank, 0)
			gs[gi].units = append(gs[gi].units, ui)
		}
	}
	return gs
}

// assignCriteria gives each criterion to the group holding its best unit.
// A criterion about no unit follows the criterion before it (else the one
// after), as criteria are usually listed by topic; when no criterion is
// about any unit, the criteria are dealt in order, in runs, over the
// groups.
func assignCriteria(gs []group, sc critScores, n int) {
	owner := map[int]int{}
	for gi := range gs {
		for _, u := range gs[gi].units {
			owner[u] = gi
		}
	}
	at := make([]int, n)
	matched := false
	for ci := range n {
		at[ci] = -1
		if b := sc.best[ci]; b >= 0 {
			at[ci] = owner[b]
			matched = true
		}
	}
	if !matched {
		for ci := range n {
			gs[ci*len(gs)/n].crit = append(gs[ci*len(gs)/n].crit, ci)
		}
		return
	}
	for ci := range n {
		if at[ci] >= 0 {
			continue
		}
		for d := 1; d < n; d++ {
			if ci-d >= 0 && sc.best[ci-d] >= 0 {
				at[ci] = owner[sc.best[ci-d]]
				break
			}
			if ci+d < n && sc.best[ci+d] >= 0 {
				at[ci] = owner[sc.best[ci+d]]
				break
			}
		}
	}
	for ci := range n {
		gs[at[ci]].crit = append(gs[at[ci]].crit, ci)
	}
}

// groupRank is the lowest tier rank of a group's units.
func groupRank(g *group, us []unit) int {
	r := len(tierTable)
	for _, u := range g.units {
		r = min(r, us[u].rank)
	}
	return r
}

// closestGroup returns the group with criteria whose rank is closest to
// rank; on a tie the one nearest to position at in gs, the earlier first.
func closestGroup(gs []group, us []unit, rank, at int) int {
	best, bestD, bestP := -1, 0, 0
	for gi := range gs {
		if len(gs[gi].crit) == 0 {
			continue
		}
		d := abs(groupRank(&gs[gi], us) - rank)
		p := abs(gi - at)
		if best < 0 || d < bestD || (d == bestD && p < bestP) {
			best, bestD, bestP = gi, d, p
		}
	}
	if best < 0 {
		return 0
	}
	return best
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// mergeEmpty merges every group without criteria into the group with
// criteria of the nearest tier: a file no criterion is about goes to the
// part that needs it by layer.
func (s *splitter) mergeEmpty(gs []group, us []unit) []group {
	var out []group
	type pending struct {
		g  group
		at int // where it stood among the groups kept
	}
	var empty []pending
	for _, g := range gs {
		if len(g.crit) == 0 {
			empty = append(empty, pending{g, len(out)})
		} else {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return gs[:0]
	}
	for _, e := range empty {
		for _, u := range e.g.units {
			gi := closestGroup(out, us, us[u].rank, max(e.at-1, 0))
			if us[u].work == "" {
				// Tests of no file of the task check the whole: the last
				// part, which completes it.
				gi = len(out) - 1
			}
			out[gi].units = append(out[gi].units, u)
		}
	}
	return out
}

// mergeLayers merges neighbouring groups of one layer while the result
// stays within max_criteria_per_task and max_files_to_create.
func (s *splitter) mergeLayers(gs []group, us []unit) []group {
	gs = s.orderGroups(gs, us)
	l := s.r.limits
	for i := 0; i+1 < len(gs); {
		a, b := &gs[i], &gs[i+1]
		works := 0
		for _, u := range append(append([]int{}, a.units...), b.units...) {
			if us[u].work != "" {
				works++
			}
		}
		if tierLayer(groupRank(a, us)) != tierLayer(groupRank(b, us)) ||
			len(a.crit)+len(b.crit) > l.MaxCriteriaPerTask || works > l.MaxFilesToCreate {
			i++
			continue
		}
		a.units = append(a.units, b.units...)
		a.crit = append(a.crit, b.crit...)
		gs = append(gs[:i+1], gs[i+2:]...)
	}
	return gs
}

// maxPartsFor is the most parts a split of t makes: ⌈n / limit⌉ + 1 for
// its criteria (max_criteria_per_task) or its files (max_files_to_create),
// whichever needs more.
func (s *splitter) maxPartsFor(t *Task) int {
	l := s.r.limits
	files := len(workFiles(t))
	return min(maxParts, max(ceilDiv(len(t.AcceptanceCriteria), l.MaxCriteriaPerTask), ceilDiv(files, l.MaxFilesToCreate))+1)
}

// mergeToCap merges neighbouring groups, in import order, until there are
// at most limit: each time the pair that is smallest together, preferring
// a pair of one tier, then of one layer.
func (s *splitter) mergeToCap(gs []group, us []unit, limit int) []group {
	gs = s.orderGroups(gs, us)
	l := s.r.limits
	size := func(g *group) float64 {
		files := 0
		for _, u := range g.units {
			files += len(us[u].files)
		}
		return float64(len(g.crit))/float64(l.MaxCriteriaPerTask) + float64(files)/float64(l.MaxFilesToCreate)
	}
	for len(gs) > max(limit, 1) {
		best, bestCost := 0, math.Inf(1)
		for i := 0; i+1 < len(gs); i++ {
			a, b := groupRank(&gs[i], us), groupRank(&gs[i+1], us)
			cost := size(&gs[i]) + size(&gs[i+1])
			if a != b {
				cost++
			}
			if tierLayer(a) != tierLayer(b) {
				cost++
			}
			if cost < bestCost {
				best, bestCost = i, cost
			}
		}
		m := group{units: append(append([]int{}, gs[best].units...), gs[best+1].units...),
			crit: append(append([]int{}, gs[best].crit...), gs[best+1].crit...)}
		gs = append(gs[:best], append([]group{m}, gs[best+2:]...)...)
	}
	return gs
}

func tierLayer(rank int) layer {
	if rank >= 0 && rank < len(tierTable) {
		return tierTable[rank].layer
	}
	return layerBusiness
}

// orderGroups orders groups so that a group comes after those whose files
// its files import, else by rank, then by their first unit.
func (s *splitter) orderGroups(gs []group, us []unit) []group {
	first := func(g *group) int {
		m := len(us)
		for _, u := range g.units {
			m = min(m, u)
		}
		return m
	}
	imports := func(a, b *group) bool {
		for _, x := range a.units {
			for _, y := range b.units {
				if x != y && !containsInt(b.units, x) && s.unitImports(&us[x], &us[y]) {
					return true
				}
			}
		}
		return false
	}
	order := topoOrder(len(gs), func(i, j int) bool { return imports(&gs[j], &gs[i]) }, func(i, j int) bool {
		ri, rj := groupRank(&gs[i], us), groupRank(&gs[j], us)
		return ri < rj || (ri == rj && first(&gs[i]) < first(&gs[j]))
	})
	out := make([]group, len(gs))
	for k, i := range order {
		out[k] = gs[i]
	}
	return out
}

// topoOrder orders 0..n-1 so that i comes before j when before(i, j),
// and otherwise as close to the order of less as it can: it fills the
// order from the end, each time with the greatest (by less) of the items
// nothing left must follow, so an item moves forward only as far as what
// needs it. On a cycle it takes the greatest of those left.
func topoOrder(n int, before func(i, j int) bool, less func(i, j int) bool) []int {
	placed := make([]bool, n)
	out := make([]int, n)
	for k := n - 1; k >= 0; k-- {
		pick := -1
		for pass := 0; pass < 2 && pick < 0; pass++ {
			for j := range n {
				if placed[j] {
					continue
				}
				free := true
				for i := 0; pass == 0 && i < n; i++ {
					if !placed[i] && i != j && before(j, i) {
						free = false
						break
					}
				}
				if free && (pick < 0 || less(pick, j)) {
					pick = j
				}
			}
		}
		placed[pick] = true
		out[k] = pick
	}
	return out
}

// parts turns ordered groups into chained parts of t.
func (s *splitter) parts(t *Task, st Strategy, us []unit, gs []group) []Task {
	labels := make([]string, len(gs))
	for i := range gs {
		labels[i] = groupLabel(st, &gs[i], us)
	}
	count := map[string]int{}
	for _, l := range labels {
		count[l]++
	}
	for i, l := range labels {
		if count[l] > 1 {
			labels[i] = fmt.Sprintf("%s, part %d of %d", l, i+1, len(gs))
		}
	}
	create := toSet(t.FilesToCreate)
	modify := toSet(t.FilesToModify)
	tests := toSet(t.TestFiles)
	created := map[string]bool{}
	parts := make([]Task, len(gs))
	for i := range gs {
		p := s.newPart(t, i, labels[i])
		for _, ci := range gs[i].crit {
			p.AcceptanceCriteria = append(p.AcceptanceCriteria, t.AcceptanceCriteria[ci])
		}
		for _, ui := range append(append([]int{}, gs[i].units...), gs[i].shared...) {
			for _, f := range us[ui].files {
				if create[f] && !created[f] {
					created[f] = true
					p.FilesToCreate = append(p.FilesToCreate, f)
				} else if create[f] || modify[f] {
					p.FilesToModify = append(p.FilesToModify, f)
				}
				if tests[f] {
					p.TestFiles = append(p.TestFiles, f)
				}
			}
		}
		parts[i] = p
	}
	return parts
}

// groupLabel names a part: by directory (files), layer (layers) or tier
// (criteria).
func groupLabel(st Strategy, g *group, us []unit) string {
	var files []string
	var names []string
	for _, ui := range g.units {
		u := &us[ui]
		files = append(files, u.files[0])
		name := ""
		switch st {
		case StrategyLayers:
			name = tierTable[u.rank].name
		case StrategyCriteria:
			if u.tier >= 0 {
				name = tierTable[u.tier].name
			}
		}
		if name != "" && !containsStr(names, name) {
			names = append(names, name)
		}
	}
	if st == StrategyLayers {
		if ls := wholeLayers(g, us); len(ls) > 0 {
			if len(ls) == 1 {
				return ls[0] + " layer"
			}
			return strings.Join(ls, " and ") + " layers"
		}
	}
	if st == StrategyLayers || (st == StrategyCriteria && len(names) > 0 && len(names) == len(uniqueTiers(g, us))) {
		return strings.Join(names, ", ")
	}
	d := commonDir(files)
	if d == "." {
		if len(files) == 1 {
			return files[0]
		}
		return "top level"
	}
	return d
}

func uniqueTiers(g *group, us []unit) []int {
	var out []int
	for _, ui := range g.units {
		if !containsInt(out, us[ui].tier) {
			out = append(out, us[ui].tier)
		}
	}
	return out
}

// wholeLayers returns the layers of g's units, in chain order, when g
// holds every unit of those layers; else nil.
func wholeLayers(g *group, us []unit) []string {
	in := map[layer]bool{}
	for _, ui := range g.units {
		in[tierLayer(us[ui].rank)] = true
	}
	for ui := range us {
		if in[tierLayer(us[ui].rank)] && !containsInt(g.units, ui) {
			return nil
		}
	}
	var out []string
	for _, l := range []layer{layerData, layerBusiness, layerPresentation} {
		if in[l] {
			out = append(out, l.String())
		}
	}
	return out
}

// newPart makes part i of t, without criteria or files. Its title is the
// original task's with one " [label]": a part of a part joins both labels.
func (s *splitter) newPart(t *Task, i int, label string) Task {
	root := t.SplitFrom
	if root == "" {
		root = t.ID
		s.titles[root] = t.Title
	}
	if parent, ok := s.labels[t.ID]; ok && label != parent && !strings.HasPrefix(label, parent+", ") {
		label = parent + ", " + label
	}
	id := partID(t.ID, i)
	s.labels[id] = label
	var deps []string
	if i == 0 {
		deps = append([]string{}, t.Dependencies...)
	} else {
		deps = []string{partID(t.ID, i-1)}
	}
	return Task{
		ID:                 id,
		Title:              partTitle(s.titles[root], label),
		UserStory:          t.UserStory,
		AcceptanceCriteria: []string{},
		FilesToCreate:      []string{},
		FilesToModify:      []string{},
		TestFiles:          []string{},
		Dependencies:       deps,
		MilestoneID:        t.MilestoneID,
		Priority:           t.Priority,
		Status:             StatusPending,
		MaxAttempts:        t.MaxAttempts,
		SplitFrom:          root,
	}
}

func partID(id string, i int) string { return id + "-" + string(rune('a'+i)) }

// maxLabelLen bounds a part's label, so that the title keeps room.
const maxLabelLen = 48

// partTitle appends " [label]" to title, shortening title with "…" to stay
// within MaxTitleLen.
func partTitle(title, label string) string {
	suffix := " [" + truncateRunes(label, maxLabelLen) + "]"
	room := MaxTitleLen - utf8.RuneCountInString(suffix)
	if room < 8 {
		suffix = ""
		room = MaxTitleLen
	}
	return truncateRunes(title, room) + suffix
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

func ceilDiv(a, b int) int {
	if b <= 0 {
		return a
	}
	return (a + b - 1) / b
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

func containsInt(list []int, n int) bool {
	for _, e := range list {
		if e == n {
			return true
		}
	}
	return false
}
