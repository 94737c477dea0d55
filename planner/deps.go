package planner

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrCycle is wrapped by *CycleError.
var ErrCycle = errors.New("dependency cycle")

// CycleError reports the dependency cycles of a plan, each as a path that
// ends where it starts: ["T2", "T5", "T2"] means T2 depends on T5, which
// depends on T2.
type CycleError struct {
	Cycles [][]string
	// Paths are the cycles as text, with the file behind each file-based
	// edge (see CyclePaths); when nil, Error joins the IDs of Cycles.
	Paths []string
}

// MaxCyclesInError bounds how many cycles CycleError.Error lists; the
// rest are counted.
const MaxCyclesInError = 10

// Error is one summary line, then the cycles one per line, at most
// MaxCyclesInError of them, then "… and N more cycles".
func (e *CycleError) Error() string {
	paths := e.Paths
	if paths == nil {
		paths = make([]string, len(e.Cycles))
		for i, c := range e.Cycles {
			paths[i] = strings.Join(c, " -> ")
		}
	}
	var b strings.Builder
	if len(paths) == 1 {
		b.WriteString("dependency cycle:")
	} else {
		fmt.Fprintf(&b, "%d dependency cycles:", len(paths))
	}
	for i, p := range paths {
		if i == MaxCyclesInError {
			more := len(paths) - i
			if more == 1 {
				b.WriteString("\n  … and 1 more cycle")
			} else {
				fmt.Fprintf(&b, "\n  … and %d more cycles", more)
			}
			break
		}
		b.WriteString("\n  " + p)
	}
	return b.String()
}

// CyclePaths writes each cycle as "T2 -> T5 (T5 creates src/a.go) -> T2":
// an edge that a file explains (the dependent task modifies or tests a
// file that the other creates) names that file.
func CyclePaths(tasks []Task, cycles [][]string) []string {
	index := make(map[string]int, len(tasks))
	for i := range tasks {
		index[tasks[i].ID] = i
	}
	out := make([]string, len(cycles))
	for i, c := range cycles {
		var b strings.Builder
		for k, id := range c {
			if k > 0 {
				b.WriteString(" -> ")
			}
			b.WriteString(id)
			if k == 0 {
				continue
			}
			from, okf := index[c[k-1]]
			to, okt := index[id]
			if !okf || !okt {
				continue
			}
			if f := edgeFile(&tasks[from], &tasks[to]); f != "" {
				fmt.Fprintf(&b, " (%s creates %s)", id, f)
			}
		}
		out[i] = b.String()
	}
	return out
}

// edgeFile returns the first file that from modifies or tests and to
// creates, or "".
func edgeFile(from, to *Task) string {
	if len(to.FilesToCreate) == 0 {
		return ""
	}
	created := toSet(to.FilesToCreate)
	for _, list := range [][]string{from.FilesToModify, from.TestFiles} {
		for _, f := range list {
			if created[f] {
				return f
			}
		}
	}
	return ""
}

// Unwrap makes errors.Is(err, ErrCycle) true.
func (e *CycleError) Unwrap() error { return ErrCycle }

// MaxCycles bounds how many cycles FindCycles lists.
const MaxCycles = 100

// maxCycleSteps bounds the work of the cycle search on pathological graphs;
// every strongly connected component still yields at least one cycle.
const maxCycleSteps = 1 << 22

// expandDeps replaces every dependency on a split task by its leaf parts,
// recursively, and removes repeats.
func expandDeps(tasks []Task, children map[string][]string) {
	if len(children) == 0 {
		return
	}
	var expand func(id string, out *[]string, seen map[string]bool)
	expand = func(id string, out *[]string, seen map[string]bool) {
		if parts, ok := children[id]; ok {
			for _, p := range parts {
				expand(p, out, seen)
			}
			return
		}
		if !seen[id] {
			seen[id] = true
			*out = append(*out, id)
		}
	}
	for i := range tasks {
		t := &tasks[i]
		needs := false
		for _, d := range t.Dependencies {
			if _, ok := children[d]; ok {
				needs = true
				break
			}
		}
		if !needs {
			continue
		}
		out := make([]string, 0, len(t.Dependencies)+2)
		seen := map[string]bool{}
		for _, d := range t.Dependencies {
			expand(d, &out, seen)
		}
		t.Dependencies = out
	}
}

// AddFileDependencies makes every task that modifies or tests a file another
// task creates depend on that task, unless it already does. It returns how
// many dependencies it added.
func AddFileDependencies(tasks []Task) int {
	creator := make(map[string]int)
	for i := range tasks {
		for _, f := range tasks[i].FilesToCreate {
			if _, ok := creator[f]; !ok {
				creator[f] = i
			}
		}
	}
	added := 0
	for i := range tasks {
		t := &tasks[i]
		var have map[string]bool
		for _, list := range [][]string{t.FilesToModify, t.TestFiles} {
			for _, f := range list {
				c, ok := creator[FileOf(f)]
				if !ok || c == i {
					continue
				}
				if have == nil {
					have = toSet(t.Dependencies)
				}
				id := tasks[c].ID
				if !have[id] {
					have[id] = true
					t.Dependencies = append(t.Dependencies, id)
					added++
				}
			}
		}
	}
	return added
}

// FindCycles returns the elementary cycles of the dependency graph (at most
// MaxCycles), each starting and ending at its earliest task in plan order,
// ordered by that task. Dependencies on unknown IDs are ignored. A
// self-dependency is the cycle [T, T].
func FindCycles(tasks []Task) [][]string {
	g := newDepGraph(tasks)
	var cycles [][]int
	for _, comp := range g.sccs() {
		if len(comp) == 1 && !g.selfLoop(comp[0]) {
			continue
		}
		cycles = g.circuits(comp, cycles)
		if len(cycles) >= MaxCycles {
			break
		}
	}
	out := make([][]string, len(cycles))
	for i, c := range cycles {
		p := make([]string, len(c)+1)
		for j, v := range c {
			p[j] = tasks[v].ID
		}
		p[len(c)] = tasks[c[0]].ID
		out[i] = p
	}
	return out
}

// depGraph is the dependency graph by plan index: adj[v] lists the tasks v
// depends on, in the order of v's dependencies.
type depGraph struct {
	adj [][]int
}

func newDepGraph(tasks []Task) *depGraph {
	index := make(map[string]int, len(tasks))
	for i := range tasks {
		index[tasks[i].ID] = i
	}
	g := &depGraph{adj: make([][]int, len(tasks))}
	for i := range tasks {
		for k, d := range tasks[i].Dependencies {
			j, ok := index[d]
			if ok && !containsStr(tasks[i].Dependencies[:k], d) {
				g.adj[i] = append(g.adj[i], j)
			}
		}
	}
	return g
}

func (g *depGraph) selfLoop(v int) bool {
	for _, w := range g.adj[v] {
		if w == v {
			return true
		}
	}
	return false
}

// sccs returns the strongly connected components (Tarjan's algorithm,
// iterative), each sorted by plan index, ordered by their least index.
func (g *depGraph) sccs() [][]int {
	n := len(g.adj)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var comps [][]int
	next := 0
	type frame struct{ v, edge int }
	for root := range n {
		if index[root] >= 0 {
			continue
		}
		call := []frame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			v := f.v
			if f.edge < len(g.adj[v]) {
				w := g.adj[v][f.edge]
				f.edge++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{w, 0})
				} else if onStack[w] && index[w] < low[v] {
					low[v] = index[w]
				}
				continue
			}
			call = call[:len(call)-1]
			if len(call) > 0 {
				if u := call[len(call)-1].v; low[v] < low[u] {
					low[u] = low[v]
				}
			}
			if low[v] == index[v] {
				var comp []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				sort.Ints(comp)
				comps = append(comps, comp)
			}
		}
	}
	sort.Slice(comps, func(i, j int) bool { return comps[i][0] < comps[j][0] })
	return comps
}

// circuits appends the elementary cycles within one strongly connected
// component to out (Johnson's algorithm), stopping at MaxCycles.
func (g *depGraph) circuits(comp []int, out [][]int) [][]int {
	start := len(out)
	in := make(map[int]bool, len(comp))
	for _, v := range comp {
		in[v] = true
	}
	steps := 0
	blocked := make(map[int]bool, len(comp))
	bset := make(map[int]map[int]bool, len(comp))
	var path []int
	var unblock func(u int)
	unblock = func(u int) {
		blocked[u] = false
		for w := range bset[u] {
			delete(bset[u], w)
			if blocked[w] {
				unblock(w)
			}
		}
	}
	var circuit func(v, s int) bool
	circuit = func(v, s int) bool {
		found := false
		path = append(path, v)
		blocked[v] = true
		for _, w := range g.adj[v] {
			steps++
			if len(out) >= MaxCycles || (steps > maxCycleSteps && len(out) > start) {
				break
			}
			if !in[w] || w < s {
				continue
			}
			if w == s {
				out = append(out, append([]int{}, path...))
				found = true
			} else if !blocked[w] && circuit(w, s) {
				found = true
			}
		}
		if found {
			unblock(v)
		} else {
			for _, w := range g.adj[v] {
				if in[w] && w >= s {
					if bset[w] == nil {
						bset[w] = map[int]bool{}
					}
					bset[w][v] = true
				}
			}
		}
		path = path[:len(path)-1]
		return found
	}
	for _, s := range comp {
		if len(out) >= MaxCycles || (steps > maxCycleSteps && len(out) > start) {
			break
		}
		for _, v := range comp {
			blocked[v] = false
			delete(bset, v)
		}
		circuit(s, s)
	}
	return out
}
