package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// leavesOf returns the tasks split from id, in plan order.
func leavesOf(p *Plan, id string) []Task {
	var out []Task
	for _, t := range p.Tasks {
		if t.SplitFrom == id {
			out = append(out, t)
		}
	}
	return out
}

// requireSplitInvariants checks the documented split rules for one raw task.
func requireSplitInvariants(t *testing.T, p *Plan, orig RawTask, threshold float64) {
	t.Helper()
	leaves := leavesOf(p, orig.ID)
	require.GreaterOrEqual(t, len(leaves), 2, "%s was not split", orig.ID)
	crit := map[string]int{}
	fileSeen := map[string]bool{}
	for i, l := range leaves {
		require.True(t, strings.HasPrefix(l.ID, orig.ID+"-"), "part %s is named after %s", l.ID, orig.ID)
		require.Equal(t, orig.MilestoneID, l.MilestoneID)
		require.LessOrEqual(t, len([]rune(l.Title)), MaxTitleLen, "title of %s", l.ID)
		for _, c := range l.AcceptanceCriteria {
			crit[c]++
		}
		for _, f := range l.Files() {
			fileSeen[f] = true
		}
		if l.Complexity.Total > threshold {
			found := false
			for _, w := range p.Warnings {
				if strings.HasPrefix(w, l.ID+":") && strings.Contains(w, "cannot be split further") {
					found = true
				}
			}
			require.True(t, found, "part %s is above the threshold (%.2f) without a warning; warnings: %v", l.ID, l.Complexity.Total, p.Warnings)
		}
		require.Equal(t, l.Complexity, resolvedT(t, nil).score(&leaves[i]), "complexity of %s is its own score", l.ID)
	}
	require.Len(t, crit, len(orig.AcceptanceCriteria), "every criterion lands in a part")
	for _, c := range orig.AcceptanceCriteria {
		require.Equal(t, 1, crit[c], "criterion %q lands in exactly one part", c)
	}
	for _, list := range [][]string{orig.FilesToCreate, orig.FilesToModify, orig.TestFiles} {
		for _, f := range list {
			require.True(t, fileSeen[f], "file %s lands in at least one part", f)
		}
	}
	requireOneCreator(t, leaves, orig)
}

// requireOneCreator checks that every file to create of orig has exactly
// one creator among its parts.
func requireOneCreator(t *testing.T, leaves []Task, orig RawTask) {
	t.Helper()
	creators := map[string]int{}
	for _, l := range leaves {
		for _, f := range l.FilesToCreate {
			creators[f]++
		}
	}
	for _, f := range orig.FilesToCreate {
		require.Equal(t, 1, creators[f], "file %s has one creator", f)
	}
}

func TestSplitStrategies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		task     RawTask
		strategy Strategy
		parts    []string
		check    func(t *testing.T, p *Plan)
	}{
		{
			name: "files: grouped by directory",
			task: RawTask{
				ID: "T1", Title: "Many files", UserStory: "s", MilestoneID: "M1",
				AcceptanceCriteria: []string{"The d1 files compile", "The d0 files compile", "The d2 files compile"},
				FilesToCreate:      files(12, 3),
				TestFiles:          []string{"d1/f1_test.go", "other/x_test.go"},
			},
			strategy: StrategyFiles,
			parts:    []string{"T1-a", "T1-b", "T1-c"},
			check: func(t *testing.T, p *Plan) {
				a, b, c := p.Task("T1-a"), p.Task("T1-b"), p.Task("T1-c")
				require.Equal(t, []string{"d0/f0.go", "d0/f3.go", "d0/f6.go", "d0/f9.go"}, a.FilesToCreate)
				require.Equal(t, []string{"d1/f1.go", "d1/f4.go", "d1/f7.go", "d1/f10.go"}, b.FilesToCreate)
				require.Equal(t, []string{"The d0 files compile"}, a.AcceptanceCriteria)
				require.Equal(t, []string{"The d1 files compile"}, b.AcceptanceCriteria)
				require.Equal(t, []string{"The d2 files compile"}, c.AcceptanceCriteria)
				require.Equal(t, []string{"d1/f1_test.go"}, b.TestFiles, "test file by stem")
				require.Equal(t, []string{"other/x_test.go"}, c.TestFiles, "unmatched test file goes to the last part")
				require.Equal(t, "Many files [d0]", a.Title)
			},
		},
		{
			name: "files: one directory is cut in runs that keep each file with its test",
			task: RawTask{
				ID: "T1", Title: "One dir", UserStory: "s", MilestoneID: "M1",
				AcceptanceCriteria: []string{"f0.go parses", "f5.go prints", "zz.go uses a cache"},
				FilesToCreate:      files(10, 1),
				FilesToModify:      []string{"d0/zz.go"},
				TestFiles:          []string{"d0/f4_test.go", "d0/f5_test.go"},
			},
			strategy: StrategyFiles,
			parts:    []string{"T1-a", "T1-b", "T1-c"},
			check: func(t *testing.T, p *Plan) {
				a, b, c := p.Task("T1-a"), p.Task("T1-b"), p.Task("T1-c")
				require.Equal(t, []string{"f0.go parses"}, a.AcceptanceCriteria)
				require.Equal(t, []string{"f5.go prints"}, b.AcceptanceCriteria)
				require.Equal(t, []string{"zz.go uses a cache"}, c.AcceptanceCriteria)
				for _, p := range []*Task{a, b, c} {
					require.Equal(t, containsStr(p.FilesToCreate, "d0/f4.go"), containsStr(p.TestFiles, "d0/f4_test.go"), "f4 and its test in %s", p.ID)
				}
				require.Equal(t, []string{"d0/zz.go"}, c.FilesToModify)
				require.Equal(t, "One dir [d0, part 1 of 3]", a.Title)
			},
		},
		{
			name: "layers: data, business, presentation chained",
			task: RawTask{
				ID: "T1", Title: "Feature", UserStory: "s", MilestoneID: "M1",
				AcceptanceCriteria: []string{
					"The handler returns 201",
					"The database store keeps a transaction log",
					"The service validates input with an algorithm",
					"Errors are reported etc",
				},
				FilesToCreate: []string{"api/handler.go", "store/db.go", "service/svc.go"},
				TestFiles:     []string{"api/handler_test.go", "store/db_test.go"},
				Dependencies:  []string{"T0"},
			},
			strategy: StrategyLayers,
			parts:    []string{"T1-a", "T1-b"},
			check: func(t *testing.T, p *Plan) {
				a, b := p.Task("T1-a"), p.Task("T1-b")
				// ⌈4 / 7⌉ + 1 = 2 parts at most: the business layer joins the data layer.
				require.Equal(t, []string{"store/db.go", "service/svc.go"}, a.FilesToCreate)
				require.Equal(t, []string{"api/handler.go"}, b.FilesToCreate)
				require.Equal(t, []string{"The database store keeps a transaction log", "The service validates input with an algorithm", "Errors are reported etc"}, a.AcceptanceCriteria,
					"a criterion about no file follows the one before it")
				require.Equal(t, []string{"The handler returns 201"}, b.AcceptanceCriteria)
				require.Equal(t, []string{"T0"}, a.Dependencies, "the first part inherits the dependencies")
				require.Equal(t, []string{"T1-a"}, b.Dependencies, "chain")
				require.Equal(t, []string{"store/db_test.go"}, a.TestFiles)
				require.Equal(t, []string{"api/handler_test.go"}, b.TestFiles)
				require.Equal(t, "Feature [data and business layers]", a.Title)
				require.Equal(t, "Feature [presentation layer]", b.Title)
			},
		},
		{
			name: "criteria: divided in order",
			task: RawTask{
				ID: "T1", Title: "Secure sync", UserStory: "s", MilestoneID: "M1",
				AcceptanceCriteria: []string{
					"Uses encryption", "Uses a cache", "Handles concurrent writers",
					"Retries with backoff, etc", "Maybe rotates keys, tbd", "auth.go checks tokens",
				},
				FilesToCreate: []string{"sync/sync.go", "sync/auth.go"},
				TestFiles:     []string{"sync/sync_test.go"},
			},
			strategy: StrategyCriteria,
			parts:    []string{"T1-a", "T1-b"},
			check: func(t *testing.T, p *Plan) {
				a, b := p.Task("T1-a"), p.Task("T1-b")
				require.Equal(t, []string{"Uses encryption", "Uses a cache", "Handles concurrent writers"}, a.AcceptanceCriteria)
				require.Equal(t, []string{"Retries with backoff, etc", "Maybe rotates keys, tbd", "auth.go checks tokens"}, b.AcceptanceCriteria)
				require.Equal(t, []string{"sync/sync.go"}, a.FilesToCreate, "a run about no file gets the first file")
				require.Empty(t, b.FilesToModify, "files are not copied into every part")
				require.Equal(t, []string{"sync/auth.go"}, b.FilesToCreate, "a named file goes to the part that names it")
				require.Equal(t, []string{"sync/sync_test.go"}, a.TestFiles, "the test goes with its file")
				require.Empty(t, b.TestFiles)
				require.Equal(t, "Secure sync [sync, part 2 of 2]", b.Title)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tasks := []RawTask{tt.task}
			if len(tt.task.Dependencies) > 0 {
				tasks = append([]RawTask{rt("T0")}, tasks...)
			}
			p := build(t, rawPlan(tasks...), nil)
			require.Len(t, p.Splits, 1, "splits: %+v", p.Splits)
			s := p.Splits[0]
			require.Equal(t, tt.strategy, s.Strategy, "strategy; complexity %+v", s.Complexity)
			require.Equal(t, tt.parts, s.Parts)
			require.Equal(t, tt.parts, ids(leavesOf(p, "T1")))
			requireSplitInvariants(t, p, tt.task, 5)
			tt.check(t, p)
		})
	}
}

func TestSplitRecursive(t *testing.T) {
	t.Parallel()
	// Two directories of twelve files; d0's criteria are about concurrency
	// and caching, so its part is still above the threshold and is split
	// again, into runs of its files.
	var crit []string
	for _, i := range []int{0, 4, 8} {
		crit = append(crit, fmt.Sprintf("f%d.go is concurrent, cached and retried", i))
	}
	for _, i := range []int{13, 17, 21} {
		crit = append(crit, fmt.Sprintf("f%d.go works", i))
	}
	orig := RawTask{
		ID: "T1", Title: "Huge", UserStory: "s", MilestoneID: "M1",
		AcceptanceCriteria: crit,
		FilesToCreate:      files(24, 2),
		TestFiles:          []string{"d0/f4_test.go", "d1/f21_test.go"},
	}
	raw := rawPlan(orig, rt("T2", "T1"))
	p := build(t, raw, nil)
	require.Equal(t, []string{"T1-a-a", "T1-a-b", "T1-b", "T2"}, ids(p.Tasks))
	require.Len(t, p.Splits, 2)
	require.Equal(t, Split{TaskID: "T1", Strategy: StrategyFiles, Complexity: p.Splits[0].Complexity, Parts: []string{"T1-a", "T1-b"}}, p.Splits[0])
	require.Equal(t, "T1-a", p.Splits[1].TaskID)
	requireSplitInvariants(t, p, orig, 5)
	requireSplitQuality(t, p, orig, resolvedT(t, nil))
	for _, l := range leavesOf(p, "T1") {
		require.Equal(t, "T1", l.SplitFrom, "split_from names the raw task")
	}
	require.Equal(t, "Huge [d0, part 1 of 2]", p.Task("T1-a-a").Title, "a part of a part has one label")
	require.Equal(t, "Huge [d1]", p.Task("T1-b").Title)
	require.Equal(t, []string{"T1-a-a"}, p.Task("T1-a-b").Dependencies, "chain")
	require.Equal(t, []string{"T1-a-a", "T1-a-b"}, p.Task("T1-b").Dependencies, "a dependency on a split part becomes one on its parts")
	require.Equal(t, []string{"T1-a-a", "T1-a-b", "T1-b"}, p.Task("T2").Dependencies,
		"a dependency on a split task becomes one on all its parts")
	require.Empty(t, FindCycles(p.Tasks))
}

func TestSplitUnsplittable(t *testing.T) {
	t.Parallel()
	task := RawTask{
		ID: "T1", Title: "Hard", MilestoneID: "M1",
		AcceptanceCriteria: []string{"A concurrent cache with encryption and an algorithm, etc, maybe, tbd"},
		FilesToCreate:      []string{"a.go"},
	}
	p := build(t, rawPlan(task), nil)
	require.Equal(t, []string{"T1"}, ids(p.Tasks))
	require.Empty(t, p.Splits)
	require.Greater(t, p.Tasks[0].Complexity.Total, 5.0)
	require.Contains(t, p.Warnings, fmt.Sprintf("T1: complexity %.2f (%s) is above complexity_threshold 5 but the task cannot be split further",
		p.Tasks[0].Complexity.Total, p.Tasks[0].Complexity.Level))
}

func TestSplitOff(t *testing.T) {
	t.Parallel()
	task := RawTask{ID: "T1", Title: "Big", UserStory: "s", MilestoneID: "M1", AcceptanceCriteria: []string{"ok"}, FilesToCreate: files(12, 3)}
	l := DefaultLimits()
	l.AutoSplit = false
	p := build(t, rawPlan(task), &Opts{Limits: &l})
	require.Equal(t, []string{"T1"}, ids(p.Tasks))
	require.Contains(t, p.Warnings, "T1: complexity 6.00 (MEDIUM) is above complexity_threshold 5 and auto_split is off")

	l = DefaultLimits()
	l.ComplexityThreshold = 6
	p = build(t, rawPlan(task), &Opts{Limits: &l})
	require.Equal(t, []string{"T1"}, ids(p.Tasks), "at the threshold is not above it")
}

func TestSplitIDClash(t *testing.T) {
	t.Parallel()
	_, err := Build(rawPlan(bigTask("T1"), rt("T1-b")), nil)
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.EqualError(t, err, `tasks[0].id: auto-split of "T1": part ID "T1-b" is already used by another task; rename that task`)
}

func TestSplitSharesGivenMinutes(t *testing.T) {
	t.Parallel()
	ten := 10.0
	big := bigTask("T1")
	big.EstimatedMinutes = &ten
	p := build(t, rawPlan(big), nil)
	sum := 0.0
	for _, l := range p.Tasks {
		require.Positive(t, l.EstimatedMinutes)
		sum += l.EstimatedMinutes
	}
	require.InDelta(t, 10, sum, 0.15)
}
