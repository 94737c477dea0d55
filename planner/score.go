package planner

import (
	"math"
	"path"
	"strings"
	"unicode"
)

// Component maxima.
const (
	MaxFileScope              = 5.0
	MaxCrossFileDeps          = 2.0
	MaxSemanticComplexity     = 3.0
	MaxRequirementUncertainty = 2.0
	MaxTokenPenalty           = 1.0
	MaxTotal                  = MaxFileScope + MaxCrossFileDeps + MaxSemanticComplexity + MaxRequirementUncertainty + MaxTokenPenalty
)

// Heuristic weights, documented in the package doc.
const (
	pointsPerFile           = 0.5
	pointsPerExtraDir       = 0.5
	pointsPerExtraLayer     = 0.5
	pointsPerCriterionWord  = 0.75
	pointsPerContextWord    = 0.25
	pointsPerVagueCriterion = 0.5
	pointsPerVagueContext   = 0.25
	pointsNoUserStory       = 0.5

	tokensBase        = 500
	tokensPerCreate   = 250
	tokensPerModify   = 600
	tokensPerTestFile = 300
	charsPerToken     = 4
)

// LevelOf buckets a complexity total: LOW below 5, MEDIUM below 8, HIGH
// below 11, CRITICAL otherwise.
func LevelOf(total float64) Level {
	switch {
	case total < 5:
		return LevelLow
	case total < 8:
		return LevelMedium
	case total < 11:
		return LevelHigh
	}
	return LevelCritical
}

// layer is an architectural layer, in chain order.
type layer int

const (
	layerNone layer = iota - 1
	layerData
	layerBusiness
	layerPresentation
)

func (l layer) String() string {
	switch l {
	case layerData:
		return "data"
	case layerBusiness:
		return "business"
	case layerPresentation:
		return "presentation"
	}
	return "none"
}

// keywordSet is Keywords compiled for matching.
type keywordSet struct {
	semantic, vague matcher
	// layerWords maps the stem of each layer word to its layer; layerExts
	// maps extensions (".sql").
	layerWords map[string]layer
	layerExts  map[string]layer
	// tierByWord maps the stems of tierTable's file words to their tier;
	// tierByHint maps the stems of every layer word and tier hint to the
	// tier a criterion using it is about.
	tierByWord, tierByHint map[string]int
	// cache memoizes layerOf, tierCache tierOf and textHits hitsOf; a
	// keywordSet belongs to one Build call.
	cache     map[string]layer
	tierCache map[string]int
	textHits  map[string]hits
}

// hits are the distinct semantic and vague keywords found in one text.
type hits struct {
	sem, vague []string
}

// hitsOf returns the keywords found in text, case-insensitively.
func (ks *keywordSet) hitsOf(text string) hits {
	if h, ok := ks.textHits[text]; ok {
		return h
	}
	lower := strings.ToLower(text)
	var h hits
	h.sem = ks.semantic.findList(lower)
	h.vague = ks.vague.findList(lower)
	ks.textHits[text] = h
	return h
}

func (m matcher) findList(text string) []string {
	found := map[string]bool{}
	m.find(text, found)
	if len(found) == 0 {
		return nil
	}
	out := make([]string, 0, len(found))
	for k := range found {
		out = append(out, k)
	}
	return out
}

// addNew appends the entries of add missing from both dst and skip.
func addNew(dst []string, skip []string, add []string) []string {
	for _, a := range add {
		if !containsStr(dst, a) && !containsStr(skip, a) {
			dst = append(dst, a)
		}
	}
	return dst
}

// matcher matches whole words, in any inflection (see stem), through a map
// and phrases as substrings.
type matcher struct {
	words   map[string]string
	phrases []string
}

func newMatcher(list []string) matcher {
	m := matcher{words: make(map[string]string, len(list))}
	for _, k := range list {
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "" {
			continue
		}
		if isWord(k) {
			m.words[stem(k)] = k
		} else {
			m.phrases = append(m.phrases, k)
		}
	}
	return m
}

func isWord(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// find adds the keywords found in text (already lowercased) to hits.
func (m matcher) find(text string, hits map[string]bool) {
	if len(m.words) > 0 {
		start := -1
		for i, r := range text {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				if start < 0 {
					start = i
				}
				continue
			}
			if start >= 0 {
				if k, ok := m.words[stem(text[start:i])]; ok {
					hits[k] = true
				}
				start = -1
			}
		}
		if start >= 0 {
			if k, ok := m.words[stem(text[start:])]; ok {
				hits[k] = true
			}
		}
	}
	for _, p := range m.phrases {
		if strings.Contains(text, p) {
			hits[p] = true
		}
	}
}

func newKeywordSet(kw Keywords) *keywordSet {
	ks := &keywordSet{
		semantic:   newMatcher(kw.Semantic),
		vague:      newMatcher(kw.Vague),
		layerWords: map[string]layer{},
		layerExts:  map[string]layer{},
		tierByWord: map[string]int{},
		tierByHint: map[string]int{},
		cache:      map[string]layer{},
		tierCache:  map[string]int{},
		textHits:   map[string]hits{},
	}
	// Later lists win on a clash, so the more specific presentation and data
	// words override business.
	for _, p := range []struct {
		l    layer
		list []string
	}{{layerBusiness, kw.BusinessLayer}, {layerData, kw.DataLayer}, {layerPresentation, kw.PresentationLayer}} {
		for _, k := range p.list {
			k = strings.ToLower(strings.TrimSpace(k))
			if k == "" {
				continue
			}
			if strings.HasPrefix(k, ".") {
				ks.layerExts[k] = p.l
			} else {
				ks.layerWords[stem(k)] = p.l
			}
		}
	}
	for i, t := range tierTable {
		for _, w := range t.words {
			ks.tierByWord[stem(w)] = i
		}
		for _, e := range t.exts {
			ks.tierByWord[e] = i
		}
	}
	for w, l := range ks.layerWords {
		ks.tierByHint[w] = ks.tierRank(l, w)
	}
	for i, t := range tierTable {
		for _, w := range t.hints {
			if _, ok := ks.tierByHint[stem(w)]; !ok {
				ks.tierByHint[stem(w)] = i
			}
		}
	}
	return ks
}

// layerOf classifies a file: by extension first, then by the words of its
// base name from the last, then by its directories from the innermost out
// (see classifyWord).
func (ks *keywordSet) layerOf(file string) layer {
	if l, ok := ks.cache[file]; ok {
		return l
	}
	l := ks.classify(file)
	ks.cache[file] = l
	return l
}

func (ks *keywordSet) classify(file string) layer {
	l, _ := ks.classifyWord(file)
	return l
}

func splitWords(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// workFiles returns the distinct files to create and modify.
func workFiles(t *Task) []string {
	seen := make(map[string]bool, len(t.FilesToCreate)+len(t.FilesToModify))
	out := make([]string, 0, len(t.FilesToCreate)+len(t.FilesToModify))
	for _, list := range [][]string{t.FilesToCreate, t.FilesToModify} {
		for _, f := range list {
			if !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// EstimateTokens estimates the input tokens a worker needs for t: a base
// prompt, the task's text at 4 characters a token, and a fixed cost per
// file to create, modify and test.
func EstimateTokens(t *Task) int {
	chars := len(t.Title) + len(t.UserStory)
	for _, c := range t.AcceptanceCriteria {
		chars += len(c) + 3
	}
	return tokensBase + chars/charsPerToken +
		tokensPerCreate*len(t.FilesToCreate) + tokensPerModify*len(t.FilesToModify) + tokensPerTestFile*len(t.TestFiles)
}

// Score computes t's complexity with the default keywords and limits.
func Score(t *Task, opts *Opts) (Complexity, error) {
	r, err := opts.resolve()
	if err != nil {
		return Complexity{}, err
	}
	return r.score(t), nil
}

func (r *resolved) score(t *Task) Complexity {
	ks := r.kw
	var c Complexity

	files := workFiles(t)
	c.FileScope = math.Min(MaxFileScope, pointsPerFile*float64(len(files)))

	dirs := make(map[string]bool)
	layers := make(map[layer]bool)
	for _, f := range files {
		dirs[path.Dir(f)] = true
		if l := ks.layerOf(f); l != layerNone {
			layers[l] = true
		}
	}
	cross := pointsPerExtraDir*float64(max(0, len(dirs)-1)) + pointsPerExtraLayer*float64(max(0, len(layers)-1))
	c.CrossFileDeps = math.Min(MaxCrossFileDeps, cross)

	var semC, vagC, semX, vagX []string
	for _, c := range t.AcceptanceCriteria {
		h := ks.hitsOf(c)
		semC = addNew(semC, nil, h.sem)
		vagC = addNew(vagC, nil, h.vague)
	}
	for _, c := range []string{t.Title, t.UserStory} {
		h := ks.hitsOf(c)
		semX = addNew(semX, semC, h.sem)
		vagX = addNew(vagX, vagC, h.vague)
	}
	c.SemanticComplexity = math.Min(MaxSemanticComplexity,
		pointsPerCriterionWord*float64(len(semC))+pointsPerContextWord*float64(len(semX)))
	unc := pointsPerVagueCriterion*float64(len(vagC)) + pointsPerVagueContext*float64(len(vagX))
	if strings.TrimSpace(t.UserStory) == "" {
		unc += pointsNoUserStory
	}
	c.RequirementUncertainty = math.Min(MaxRequirementUncertainty, unc)

	if tok, limit := EstimateTokens(t), r.limits.MaxInputTokens; tok > limit {
		c.TokenPenalty = 0.5
		if float64(tok) > 1.5*float64(limit) {
			c.TokenPenalty = MaxTokenPenalty
		}
	}

	c.FileScope = round2(c.FileScope)
	c.CrossFileDeps = round2(c.CrossFileDeps)
	c.SemanticComplexity = round2(c.SemanticComplexity)
	c.RequirementUncertainty = round2(c.RequirementUncertainty)
	c.Total = round2(c.FileScope + c.CrossFileDeps + c.SemanticComplexity + c.RequirementUncertainty + c.TokenPenalty)
	c.Level = LevelOf(c.Total)
	return c
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round1(x float64) float64 { return math.Round(x*10) / 10 }

// MinutesFor derives estimated_minutes from a complexity total:
// 1 + 0.8 × total, rounded to a tenth. A task at the default threshold (5)
// gets the default max_time_minutes (5).
func MinutesFor(total float64) float64 { return round1(1 + 0.8*total) }

// dominance returns the split-relevant components normalized by their
// maxima, in tie-break order: file_scope, cross_file_deps,
// semantic_complexity, requirement_uncertainty.
func dominance(c Complexity) [4]float64 {
	return [4]float64{
		c.FileScope / MaxFileScope,
		c.CrossFileDeps / MaxCrossFileDeps,
		c.SemanticComplexity / MaxSemanticComplexity,
		c.RequirementUncertainty / MaxRequirementUncertainty,
	}
}
