package planner

import (
	"container/heap"
	"math"
	"strconv"
	"unicode"
)

// Schedule is the plan's estimated makespan.
type Schedule struct {
	Workers           int      `json:"workers"`
	MakespanMinutes   float64  `json:"makespan_minutes"`
	LowerBoundMinutes float64  `json:"lower_bound_minutes"`
	CriticalPath      []string `json:"critical_path"`
	// Waves are the batches of tasks a run with Workers workers starts
	// together, in order, when every attempt passes; a ScheduleFunc that
	// does not know them leaves them out.
	Waves [][]string `json:"waves,omitempty"`
}

// EstimateSchedule is the default ScheduleFunc. The critical path is the
// dependency chain with the most estimated minutes; the lower bound is
// max(critical path, total minutes / workers). The makespan comes from list
// scheduling: whenever a worker is free it takes the first available task in
// selection order (priority, milestone order, longest remaining chain, ID)
// whose files do not overlap a running task's. tasks must be acyclic;
// dependencies on unknown IDs are ignored.
func EstimateSchedule(tasks []Task, milestones []Milestone, workers int) Schedule {
	if workers < 1 {
		workers = 1
	}
	s := Schedule{Workers: workers, CriticalPath: []string{}}
	n := len(tasks)
	if n == 0 {
		return s
	}
	g := newDepGraph(tasks)
	order, ok := g.topo()
	if !ok {
		return s
	}
	mins := make([]float64, n)
	total := 0.0
	for i := range tasks {
		mins[i] = math.Max(0, tasks[i].EstimatedMinutes)
		total += mins[i]
	}

	// Longest chain ending at each task (head) and starting at it (tail).
	head := make([]float64, n)
	pred := make([]int, n)
	for _, v := range order {
		pred[v] = -1
		best := 0.0
		for _, d := range g.adj[v] {
			if head[d] > best || (head[d] == best && pred[v] >= 0 && d < pred[v]) {
				best, pred[v] = head[d], d
			}
		}
		head[v] = best + mins[v]
	}
	dependents := make([][]int, n)
	for v := range n {
		for _, d := range g.adj[v] {
			dependents[d] = append(dependents[d], v)
		}
	}
	tail := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		v := order[i]
		best := 0.0
		for _, w := range dependents[v] {
			best = math.Max(best, tail[w])
		}
		tail[v] = best + mins[v]
	}
	end := 0
	for v := 1; v < n; v++ {
		if head[v] > head[end] {
			end = v
		}
	}
	var path []string
	for v := end; v >= 0; v = pred[v] {
		path = append(path, tasks[v].ID)
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	s.CriticalPath = path
	cp := head[end]
	s.LowerBoundMinutes = round1(math.Max(cp, total/float64(workers)))

	// List scheduling.
	msOrder := make(map[string]int, len(milestones))
	for i, m := range milestones {
		msOrder[m.ID] = i
	}
	rank := make([]int, n)
	prio := make([]int, n)
	for v := range n {
		prio[v] = tasks[v].Priority.Rank()
		rank[v] = len(milestones)
		if o, ok := msOrder[tasks[v].MilestoneID]; ok {
			rank[v] = o
		}
	}
	ready := &readyHeap{less: func(a, b int) bool {
		if prio[a] != prio[b] {
			return prio[a] < prio[b]
		}
		if rank[a] != rank[b] {
			return rank[a] < rank[b]
		}
		if tail[a] != tail[b] {
			return tail[a] > tail[b]
		}
		return NaturalLess(tasks[a].ID, tasks[b].ID)
	}}
	waiting := make([]int, n)
	for v := range n {
		waiting[v] = len(g.adj[v])
		if waiting[v] == 0 {
			heap.Push(ready, v)
		}
	}
	files := make([][]string, n)
	for v := range tasks {
		files[v] = workFiles(&tasks[v])
	}
	busy := map[string]bool{}
	type run struct {
		v   int
		end float64
	}
	var running []run
	now, done := 0.0, 0
	var skipped []int
	for done < n {
		for len(running) < workers && ready.Len() > 0 {
			v := heap.Pop(ready).(int)
			if conflicts(files[v], busy) {
				skipped = append(skipped, v)
				continue
			}
			for _, f := range files[v] {
				busy[f] = true
			}
			running = append(running, run{v, now + mins[v]})
		}
		for _, v := range skipped {
			heap.Push(ready, v)
		}
		skipped = skipped[:0]
		if len(running) == 0 {
			break // unreachable for an acyclic graph
		}
		// Finish every task that ends first.
		next := running[0].end
		for _, r := range running[1:] {
			next = math.Min(next, r.end)
		}
		now = next
		kept := running[:0]
		for _, r := range running {
			if r.end > now {
				kept = append(kept, r)
				continue
			}
			done++
			for _, f := range files[r.v] {
				delete(busy, f)
			}
			for _, w := range dependents[r.v] {
				if waiting[w]--; waiting[w] == 0 {
					heap.Push(ready, w)
				}
			}
		}
		running = kept
	}
	s.MakespanMinutes = round1(math.Max(now, s.LowerBoundMinutes))
	return s
}

func conflicts(files []string, busy map[string]bool) bool {
	for _, f := range files {
		if busy[f] {
			return true
		}
	}
	return false
}

// topo returns a topological order (dependencies first), or false when the
// graph has a cycle.
func (g *depGraph) topo() ([]int, bool) {
	n := len(g.adj)
	waiting := make([]int, n)
	dependents := make([][]int, n)
	for v := range n {
		waiting[v] = len(g.adj[v])
		for _, d := range g.adj[v] {
			dependents[d] = append(dependents[d], v)
		}
	}
	order := make([]int, 0, n)
	for v := range n {
		if waiting[v] == 0 {
			order = append(order, v)
		}
	}
	for i := 0; i < len(order); i++ {
		for _, w := range dependents[order[i]] {
			if waiting[w]--; waiting[w] == 0 {
				order = append(order, w)
			}
		}
	}
	return order, len(order) == n
}

type readyHeap struct {
	items []int
	less  func(a, b int) bool
}

func (h *readyHeap) Len() int           { return len(h.items) }
func (h *readyHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *readyHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *readyHeap) Push(x any)         { h.items = append(h.items, x.(int)) }
func (h *readyHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

// NaturalLess orders IDs with their digit runs compared as numbers, so that
// T2 sorts before T10.
func NaturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := unicode.IsDigit(rune(a[0])), unicode.IsDigit(rune(b[0]))
		if da && db {
			na, ra := leadingDigits(a)
			nb, rb := leadingDigits(b)
			if na != nb {
				ia, errA := strconv.ParseUint(na, 10, 64)
				ib, errB := strconv.ParseUint(nb, 10, 64)
				if errA == nil && errB == nil && ia != ib {
					return ia < ib
				}
				if len(na) != len(nb) {
					return len(na) < len(nb)
				}
				return na < nb
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func leadingDigits(s string) (string, string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i], s[i:]
}
