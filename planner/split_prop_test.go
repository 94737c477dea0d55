package planner

import (
	"fmt"
	"math/rand/v2"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var oneLabel = regexp.MustCompile(`^ \[[^\[\]]+\]$`)

// requireSplitQuality checks the split rules that make a plan acceptable,
// for the parts of one raw task: every criterion in exactly one part, every
// file in at least one, no part without criteria or files, one label per
// title, tests with their files, no more parts per split than
// ⌈n / limit⌉ + 1, and no dependency cycle.
func requireSplitQuality(t *testing.T, p *Plan, orig RawTask, r *resolved) {
	t.Helper()
	leaves := leavesOf(p, orig.ID)
	require.NotEmpty(t, leaves, "%s was not split", orig.ID)
	crit := map[string]int{}
	for _, l := range leaves {
		require.NotEmpty(t, l.AcceptanceCriteria, "part %s has no criteria", l.ID)
		require.NotEmpty(t, l.Files(), "part %s has no files", l.ID)
		for _, c := range l.AcceptanceCriteria {
			crit[c]++
		}
		prefix := orig.Title
		if !strings.HasPrefix(l.Title, prefix+" [") {
			i := strings.Index(l.Title, "… [")
			require.GreaterOrEqual(t, i, 0, "title %q of %s does not start with %q", l.Title, l.ID, orig.Title)
			prefix = l.Title[:i+len("…")]
			require.True(t, strings.HasPrefix(orig.Title, strings.TrimSuffix(prefix, "…")), "title %q of %s", l.Title, l.ID)
		}
		require.Regexp(t, oneLabel, l.Title[len(prefix):], "title %q of %s has one label", l.Title, l.ID)
	}
	for _, c := range orig.AcceptanceCriteria {
		require.Equal(t, 1, crit[c], "criterion %q lands in exactly one part", c)
	}
	require.Len(t, crit, len(orig.AcceptanceCriteria))
	has := func(l *Task, f string) bool { return containsStr(l.Files(), f) }
	for _, list := range [][]string{orig.FilesToCreate, orig.FilesToModify, orig.TestFiles} {
		for _, f := range list {
			n := 0
			for i := range leaves {
				if has(&leaves[i], f) {
					n++
				}
			}
			require.Positive(t, n, "file %s lands in at least one part", f)
		}
	}
	requireOneCreator(t, leaves, orig)
	// Tests stay with the file of the same stem in their directory.
	work := append(append([]string{}, orig.FilesToCreate...), orig.FilesToModify...)
	for _, tf := range append(append([]string{}, orig.TestFiles...), work...) {
		if !IsTestFile(tf) {
			continue
		}
		for _, w := range work {
			if IsTestFile(w) || path.Dir(w) != path.Dir(tf) || testStem(w) != testStem(tf) {
				continue
			}
			for i := range leaves {
				require.Equal(t, has(&leaves[i], w), has(&leaves[i], tf), "part %s: %s and its test %s go together", leaves[i].ID, w, tf)
			}
		}
	}
	for _, s := range p.Splits {
		if s.TaskID == orig.ID {
			task := newTask(&orig, 1)
			require.LessOrEqual(t, len(s.Parts), (&splitter{r: r}).maxPartsFor(&task), "split of %s makes too many parts", orig.ID)
		}
	}
	require.Empty(t, p.Cycles, "the parts' dependencies are acyclic")
}

// randomTask generates a large task over a realistic layered layout, with
// tests beside some files and criteria that name files, layers, or
// nothing in particular.
func randomTask(rng *rand.Rand, id string) RawTask {
	dirs := []string{"internal/models", "internal/repository", "internal/service", "internal/handlers",
		"web/src/api", "web/src/components", "cmd/server", "app/services", "app/api", "pkg/util", "lib"}
	stems := []string{"user", "order", "invoice", "search", "auth", "cart", "report", "session"}
	exts := []string{".go", ".py", ".ts", ".tsx"}
	t := RawTask{ID: id, Title: "Feature " + id, UserStory: "As a user I want " + id, MilestoneID: "M1"}
	seen := map[string]bool{}
	for range 1 + rng.IntN(14) {
		d, st, ext := dirs[rng.IntN(len(dirs))], stems[rng.IntN(len(stems))], exts[rng.IntN(len(exts))]
		f := path.Join(d, st+ext)
		if seen[f] {
			continue
		}
		seen[f] = true
		if rng.IntN(4) == 0 {
			t.FilesToModify = append(t.FilesToModify, f)
		} else {
			t.FilesToCreate = append(t.FilesToCreate, f)
		}
		if rng.IntN(2) == 0 {
			tf := map[string]string{".go": st + "_test.go", ".py": "test_" + st + ".py", ".ts": st + ".test.ts", ".tsx": st + ".spec.tsx"}[ext]
			t.TestFiles = append(t.TestFiles, path.Join(d, tf))
		}
	}
	if rng.IntN(5) == 0 {
		t.TestFiles = append(t.TestFiles, "tests/e2e_test.go")
	}
	phrases := []string{"returns 404 for an unknown ID", "is cached with retries", "GET /items lists them",
		"the repository stores it in a transaction", "the component shows the list", "main wires it", "it is fast",
		"the model validates its fields", "the service computes totals", "maybe later, etc"}
	files := append(append([]string{}, t.FilesToCreate...), t.FilesToModify...)
	for c := range 1 + rng.IntN(22) {
		s := fmt.Sprintf("C%d %s", c, phrases[rng.IntN(len(phrases))])
		if len(files) > 0 && rng.IntN(3) == 0 {
			s += " in " + files[rng.IntN(len(files))]
		}
		t.AcceptanceCriteria = append(t.AcceptanceCriteria, s)
	}
	return t
}

// TestSplitProperties builds seeded random large tasks, with default and
// low thresholds, and checks the split rules on every split task.
func TestSplitProperties(t *testing.T) {
	t.Parallel()
	for seed := range uint64(300) {
		checkSplitSeed(t, seed, []float64{5, 3, 1.5}[seed%3])
	}
}

// FuzzSplit checks the split rules on random tasks from any seed and
// threshold: go test ./planner -run '^$' -fuzz '^FuzzSplit$' -fuzztime 20s.
func FuzzSplit(f *testing.F) {
	f.Add(uint64(7), 5.0)
	f.Add(uint64(11), 1.0)
	f.Fuzz(func(t *testing.T, seed uint64, threshold float64) {
		if !(threshold >= 0 && threshold <= MaxTotal) {
			return
		}
		checkSplitSeed(t, seed, threshold)
	})
}

// checkSplitSeed builds three random tasks from seed and checks the split
// rules on each task that was split.
func checkSplitSeed(t *testing.T, seed uint64, threshold float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 42))
	var tasks []RawTask
	for i := range 3 {
		tasks = append(tasks, randomTask(rng, fmt.Sprintf("T%d", i+1)))
	}
	// Created files have one creator across the plan.
	created := map[string]bool{}
	for i := range tasks {
		var keep []string
		for _, f := range tasks[i].FilesToCreate {
			if !created[f] {
				created[f] = true
				keep = append(keep, f)
			} else {
				tasks[i].FilesToModify = append(tasks[i].FilesToModify, f)
			}
		}
		tasks[i].FilesToCreate = keep
	}
	limits := DefaultLimits()
	limits.ComplexityThreshold = threshold
	opts := &Opts{Limits: &limits}
	p, err := Build(rawPlan(tasks...), opts)
	if err != nil {
		// Tasks may depend on each other through files in a cycle; the
		// parts of one task never do.
		var ce *CycleError
		require.ErrorAs(t, err, &ce, "seed %d", seed)
		for _, c := range ce.Cycles {
			roots := map[string]bool{}
			for _, id := range c {
				roots[rootID(p.Task(id))] = true
			}
			require.Greater(t, len(roots), 1, "seed %d: a cycle inside one task's parts: %v", seed, c)
		}
		return
	}
	for _, rt := range tasks {
		if len(leavesOf(p, rt.ID)) > 0 {
			requireSplitQuality(t, p, rt, resolvedT(t, opts))
		}
	}
}

// rootID is the ID of the raw task t is, or was split from.
func rootID(t *Task) string {
	if t.SplitFrom != "" {
		return t.SplitFrom
	}
	return t.ID
}
