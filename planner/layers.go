package planner

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tier is a finer architectural layer than the three of the scoring. The
// tiers order the parts of a split (what is imported comes first) and link
// criteria to files: a criterion about "status codes" is about a handler.
type tier struct {
	// name labels a part made of the tier's files.
	name  string
	layer layer
	// words classify a file by the words of its base name or directories;
	// plural and singular forms match alike (see stem).
	words []string
	// exts classify a file by its extension.
	exts []string
	// hints are further words that link a criterion, not a file, to the
	// tier.
	hints []string
}

// tierTable lists the tiers in import order: a tier's files usually import
// only the files of the tiers before it. The default Keywords layer lists
// are made from it.
var tierTable = []tier{
	{name: "models", layer: layerData,
		words: []string{"model", "entity", "schema", "migration", "dto", "types"},
		exts:  []string{".sql"},
		hints: []string{"field", "struct", "attribute", "validate", "valid"}},
	{name: "storage", layer: layerData,
		words: []string{"repository", "repo", "store", "storage", "dao", "db", "database", "persistence", "sql", "data", "query"},
		hints: []string{"table", "column", "row", "postgresql", "postgres", "sqlite", "mysql", "transaction", "persist", "insert"}},
	{name: "services", layer: layerBusiness,
		words: []string{"service", "domain", "logic", "core", "usecase", "business", "engine", "worker", "lib", "pkg"},
		hints: []string{"rule", "calculate", "compute"}},
	{name: "handlers", layer: layerPresentation,
		words: []string{"handler", "controller", "api", "http", "route", "router", "endpoint", "middleware", "server", "rest", "grpc", "graphql", "resolver", "cli", "command"},
		hints: []string{"request", "response", "status", "json", "header", "body", "get", "post", "put", "patch", "delete", "flag", "argument", "exit", "usage", "option", "subcommand"}},
	{name: "client", layer: layerPresentation,
		words: []string{"client", "sdk", "ui", "view", "template", "component", "page", "frontend", "web", "static", "public", "css", "hook", "screen", "widget", "style", "layout"},
		exts:  []string{".html", ".css", ".scss", ".tsx", ".jsx", ".vue", ".svelte"},
		hints: []string{"browser", "button", "click", "render", "display", "show", "scroll", "form"}},
	{name: "wiring", layer: layerPresentation,
		words: []string{"main", "cmd", "wire", "wiring", "bootstrap", "entrypoint"},
		hints: []string{"listen", "port", "startup", "start"}},
}

// tierHandlers is the tier of the HTTP handlers in tierTable.
const tierHandlers = 3

// tierNone is the rank of a file no tier claims: with the services, as the
// scoring counts it with the business layer.
const tierNone = 2

// httpRoute and statusCode mark a criterion about an HTTP handler.
var (
	httpRoute  = regexp.MustCompile(`\b(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+/`)
	statusCode = regexp.MustCompile(`\b[1-5]\d\d\b`)
)

// tierWords returns the words and extensions of the tiers of layer l, for
// the default Keywords.
func tierWords(l layer) []string {
	var out []string
	for _, t := range tierTable {
		if t.layer == l {
			out = append(out, t.words...)
			out = append(out, t.exts...)
		}
	}
	return out
}

// stem reduces an English word to a crude stem so that inflections match:
// repositories and repository, cached and cache, retried and retry. Words of
// three letters or fewer are kept whole.
func stem(w string) string {
	if len(w) <= 3 {
		return w
	}
	switch {
	case strings.HasSuffix(w, "ies") || strings.HasSuffix(w, "ied"):
		w = w[:len(w)-3] + "y"
	case strings.HasSuffix(w, "ing") && len(w) > 5:
		w = w[:len(w)-3]
	case strings.HasSuffix(w, "ed") && len(w) > 4:
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "es") && len(w) > 4:
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us"):
		w = w[:len(w)-1]
	}
	return strings.TrimSuffix(w, "e")
}

// identWords splits s into lower-cased words at every character that is
// not a letter or digit and at case changes: bookmarksClient, APIClient and
// api_client all give "…", "client".
func identWords(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 {
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			// "aB" starts a word; so does the last capital of "APIClient".
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return out
}

// tierOf classifies a file into a tier (an index of tierTable), or -1: by
// its extension, then by the words of its base name from the last (the
// head of "api_client" is the client), then by its directories from the
// innermost out. layerOf uses the same order with the configurable layer
// words, and a word moved to another layer by the configuration counts for
// the first tier of that layer.
func (ks *keywordSet) tierOf(file string) int {
	if t, ok := ks.tierCache[file]; ok {
		return t
	}
	t := -1
	if l, w := ks.classifyWord(file); l != layerNone {
		t = ks.tierRank(l, w)
	}
	ks.tierCache[file] = t
	return t
}

// tierRank returns the tier of a layer word w in layer l.
func (ks *keywordSet) tierRank(l layer, w string) int {
	if i, ok := ks.tierByWord[w]; ok && tierTable[i].layer == l {
		return i
	}
	for i, t := range tierTable {
		if t.layer == l {
			return i
		}
	}
	return tierNone
}

// rankOf is tierOf with tierNone for an unclassified file.
func (ks *keywordSet) rankOf(file string) int {
	if t := ks.tierOf(file); t >= 0 {
		return t
	}
	return tierNone
}

// classifyWord returns the layer of file and the (stemmed) word or
// extension that decided it.
func (ks *keywordSet) classifyWord(file string) (layer, string) {
	f := strings.ToLower(file)
	ext := pathExt(f)
	if l, ok := ks.layerExts[ext]; ok && ext != "" {
		return l, ext
	}
	dir, base := splitPath(file)
	base = base[:len(base)-len(ext)]
	words := identWords(base)
	for i := len(words) - 1; i >= 0; i-- {
		if l, ok := ks.layerWords[stem(words[i])]; ok {
			return l, stem(words[i])
		}
	}
	dirs := strings.Split(dir, "/")
	for i := len(dirs) - 1; i >= 0; i-- {
		words := identWords(dirs[i])
		for j := len(words) - 1; j >= 0; j-- {
			if l, ok := ks.layerWords[stem(words[j])]; ok {
				return l, stem(words[j])
			}
		}
	}
	return layerNone, ""
}

// criterionTiers counts, for each tier, the distinct words of a criterion
// that point at it: the tier's file words and hints, an HTTP route ("GET /x") and a
// status code for the handlers.
func (ks *keywordSet) criterionTiers(c string) []float64 {
	score := make([]float64, len(tierTable))
	seen := map[string]bool{}
	for _, w := range identWords(c) {
		w = stem(w)
		if i, ok := ks.tierByHint[w]; ok && !seen[w] {
			seen[w] = true
			score[i]++
		}
	}
	if httpRoute.MatchString(c) {
		score[tierHandlers]++
	}
	if statusCode.MatchString(c) {
		score[tierHandlers]++
	}
	return score
}

// pathExt is path.Ext without the leading-dot files (".env" has none).
func pathExt(f string) string {
	_, base := splitPath(f)
	i := strings.LastIndexByte(base, '.')
	if i <= 0 {
		return ""
	}
	return base[i:]
}

// splitPath splits f at its last slash; dir is "." for a top-level file.
func splitPath(f string) (dir, base string) {
	i := strings.LastIndexByte(f, '/')
	if i < 0 {
		return ".", f
	}
	return f[:i], f[i+1:]
}

// IsTestFile reports whether f is named as a test: foo_test.go,
// test_foo.py, foo_test.py, foo.test.ts, foo.spec.tsx, or anything under
// __tests__.
func IsTestFile(f string) bool {
	dir, base := splitPath(strings.ToLower(f))
	if strings.Contains("/"+dir+"/", "/__tests__/") {
		return true
	}
	name := base
	if i := strings.IndexByte(name, '.'); i > 0 {
		name = name[:i]
	}
	return strings.HasPrefix(name, "test_") || strings.HasSuffix(name, "_test") ||
		strings.Contains(base, ".test.") || strings.Contains(base, ".spec.") ||
		strings.HasSuffix(name, "_spec") || strings.HasSuffix(name, "-test") || strings.HasSuffix(name, "-spec")
}

// truncateRunes shortens s to at most n runes, ending it with "…".
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)
	return strings.TrimSpace(string(rs[:n-1])) + "…"
}
