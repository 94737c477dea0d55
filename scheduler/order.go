package scheduler

import (
	"path"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/planner"
)

// DefaultMaxAttempts applies to a task whose MaxAttempts is zero or less.
const DefaultMaxAttempts = 3

// Opts configures selection and simulation. A nil *Opts means defaults.
type Opts struct {
	// MilestoneOrder lists milestone IDs in the order their tasks should run.
	// Tasks of a milestone not listed (or of none) come after all listed ones.
	MilestoneOrder []string
}

// Available returns the IDs of the available tasks in selection order. A
// task is available when it is pending and every one of its dependencies is
// a known task whose status is completed.
//
// The order is: priority (critical first), then milestone order, then the
// longest remaining dependency chain, then ID in natural order (T2 before
// T10). Priority and milestone are inherited backwards along dependencies:
// see the package doc.
func Available(tasks []planner.Task, opts *Opts) []string {
	g := newGraph(tasks, opts)
	return g.ids(g.available())
}

// SelectBatch returns the IDs of up to n available tasks, in selection order,
// whose file sets (files to create, modify and test) are pairwise disjoint.
// The files of tasks already in progress count as taken, so a batch chosen
// while other workers are busy never overlaps them either. A task that
// collides with one chosen before it is passed over, not waited for.
func SelectBatch(tasks []planner.Task, n int, opts *Opts) []string {
	if n <= 0 {
		return nil
	}
	g := newGraph(tasks, opts)
	taken := make(map[string]bool)
	for i := range g.tasks {
		if g.tasks[i].Status == planner.StatusInProgress {
			for _, f := range g.files[i] {
				taken[f] = true
			}
		}
	}
	var out []string
	for _, i := range g.available() {
		if len(out) == n {
			break
		}
		if slices.ContainsFunc(g.files[i], func(f string) bool { return taken[f] }) {
			continue
		}
		for _, f := range g.files[i] {
			taken[f] = true
		}
		out = append(out, g.tasks[i].ID)
	}
	return out
}

// graph is an index over a task list: IDs, dependents, normalized file sets
// and the sort keys of each task.
type graph struct {
	tasks      []planner.Task
	byID       map[string]int
	dependents [][]int
	files      [][]string
	// Sort keys: inherited priority rank and milestone rank, and the longest
	// remaining chain.
	priority  []int
	milestone []int
	chain     []float64
}

func newGraph(tasks []planner.Task, opts *Opts) *graph {
	g := &graph{
		tasks:      tasks,
		byID:       make(map[string]int, len(tasks)),
		dependents: make([][]int, len(tasks)),
		files:      make([][]string, len(tasks)),
		priority:   make([]int, len(tasks)),
		milestone:  make([]int, len(tasks)),
	}
	for i := range tasks {
		if _, dup := g.byID[tasks[i].ID]; !dup {
			g.byID[tasks[i].ID] = i
		}
	}
	for i := range tasks {
		for _, d := range tasks[i].Dependencies {
			if j, ok := g.byID[d]; ok {
				g.dependents[j] = append(g.dependents[j], i)
			}
		}
		for _, f := range tasks[i].Files() {
			g.files[i] = append(g.files[i], path.Clean(f))
		}
	}
	// Only unfinished work carries weight and passes on its keys.
	remaining := make([][]int, len(tasks))
	w := make([]float64, len(tasks))
	rank := milestoneRanks(opts)
	for i := range tasks {
		g.priority[i] = tasks[i].Priority.Rank()
		g.milestone[i] = rank(tasks[i].MilestoneID)
		if done(tasks[i].Status) {
			continue
		}
		w[i] = Minutes(&tasks[i])
		for _, j := range g.dependents[i] {
			if !done(tasks[j].Status) {
				remaining[i] = append(remaining[i], j)
			}
		}
	}
	g.chain = longestChains(remaining, w)
	inheritMin(remaining, g.priority)
	inheritMin(remaining, g.milestone)
	return g
}

// Minutes is the duration this package assumes for a task: its
// EstimatedMinutes, or 1 when that is zero or negative. When no task has an
// estimate, chain lengths and makespans are therefore task counts.
func Minutes(t *planner.Task) float64 {
	if t.EstimatedMinutes > 0 {
		return t.EstimatedMinutes
	}
	return 1
}

// done reports whether a task needs no more work.
func done(s planner.Status) bool {
	return s == planner.StatusCompleted || s == planner.StatusSkipped
}

// longestChains returns, for each node, the heaviest path that starts at it
// and follows dependents, its own weight included. An edge that closes a
// cycle is ignored, so the result is defined for any input.
func longestChains(dependents [][]int, weight []float64) []float64 {
	chain := slices.Clone(weight)
	walk(dependents, func(i, j int) { chain[i] = max(chain[i], weight[i]+chain[j]) })
	return chain
}

// inheritMin lowers each node's value to the smallest value among the nodes
// that depend on it, directly or not.
func inheritMin(dependents [][]int, v []int) {
	walk(dependents, func(i, j int) { v[i] = min(v[i], v[j]) })
}

// walk visits a graph given as adjacency lists depth first and calls
// fold(i, j) for each edge i→j once j is final, ignoring edges that close a
// cycle.
func walk(dependents [][]int, fold func(i, j int)) {
	const (
		unseen = iota
		visiting
		finished
	)
	state := make([]uint8, len(dependents))
	var visit func(i int)
	visit = func(i int) {
		state[i] = visiting
		for _, j := range dependents[i] {
			if state[j] == unseen {
				visit(j)
			}
			if state[j] == finished {
				fold(i, j)
			}
		}
		state[i] = finished
	}
	for i := range dependents {
		if state[i] == unseen {
			visit(i)
		}
	}
}

// available returns the indexes of the available tasks in selection order.
func (g *graph) available() []int {
	var out []int
	for i := range g.tasks {
		if g.isAvailable(i) {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, g.compare)
	return out
}

func (g *graph) isAvailable(i int) bool {
	t := &g.tasks[i]
	if t.Status != planner.StatusPending {
		return false
	}
	for _, d := range t.Dependencies {
		j, ok := g.byID[d]
		if !ok || g.tasks[j].Status != planner.StatusCompleted {
			return false
		}
	}
	return true
}

// compare orders task indexes in selection order.
func (g *graph) compare(a, b int) int {
	if c := g.priority[a] - g.priority[b]; c != 0 {
		return c
	}
	if c := g.milestone[a] - g.milestone[b]; c != 0 {
		return c
	}
	if ca, cb := g.chain[a], g.chain[b]; ca != cb {
		if ca > cb {
			return -1
		}
		return 1
	}
	if c := CompareIDs(g.tasks[a].ID, g.tasks[b].ID); c != 0 {
		return c
	}
	return a - b // duplicate IDs: list order
}

func milestoneRanks(opts *Opts) func(string) int {
	var order []string
	if opts != nil {
		order = opts.MilestoneOrder
	}
	rank := make(map[string]int, len(order))
	for i, m := range order {
		if _, dup := rank[m]; !dup {
			rank[m] = i
		}
	}
	return func(m string) int {
		if r, ok := rank[m]; ok {
			return r
		}
		return len(order)
	}
}

func (g *graph) ids(idx []int) []string {
	if len(idx) == 0 {
		return nil
	}
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = g.tasks[i].ID
	}
	return out
}

// CompareIDs compares task IDs in natural order: runs of digits compare as
// numbers, so T2 < T10 and T1-b < T1-c. It returns -1, 0 or +1.
func CompareIDs(a, b string) int {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		if da && db {
			na, ra := splitRun(a, isDigit)
			nb, rb := splitRun(b, isDigit)
			ta, tb := strings.TrimLeft(na, "0"), strings.TrimLeft(nb, "0")
			if c := len(ta) - len(tb); c != 0 {
				return sign(c)
			}
			if c := strings.Compare(ta, tb); c != 0 {
				return c
			}
			if c := len(na) - len(nb); c != 0 {
				return sign(c)
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			if a[0] < b[0] {
				return -1
			}
			return 1
		}
		a, b = a[1:], b[1:]
	}
	return sign(len(a) - len(b))
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func splitRun(s string, in func(byte) bool) (run, rest string) {
	i := 0
	for i < len(s) && in(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
