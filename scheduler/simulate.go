package scheduler

import (
	"container/heap"
	"slices"

	"github.com/taskloom/taskloom/planner"
)

// Assignment is one task's slot in a simulated schedule, in minutes from
// the start.
type Assignment struct {
	TaskID string  `json:"task_id"`
	Worker int     `json:"worker"` // 0 to workers-1
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
}

// Schedule is a simulated run. Its JSON form is the "schedule" object of
// `taskloom plan --json`; Assignments and Unscheduled are for Go
// callers.
type Schedule struct {
	Workers           int      `json:"workers"`
	MakespanMinutes   float64  `json:"makespan_minutes"`
	LowerBoundMinutes float64  `json:"lower_bound_minutes"`
	CriticalPath      []string `json:"critical_path"` // never nil

	Assignments []Assignment `json:"-"` // by start time, then worker
	// Unscheduled lists tasks that can never start: they sit on a cycle or
	// depend, directly or not, on an unknown task or on a cycle.
	Unscheduled []string `json:"-"`
}

// Simulate list-schedules the remaining work on the given number of workers
// (at least 1) and returns the makespan in minutes.
//
// Completed tasks are done; every other task is work still to do and takes
// Minutes(task). Whenever a worker is free, it takes the first task, in
// selection order (see Available), whose dependencies have finished and
// whose files no running task holds: the same rule SelectBatch applies,
// with workers refilled as soon as one finishes. Because the longest
// remaining chain is a key of that order, among tasks of equal priority and
// milestone the simulation is critical-path first.
//
// LowerBoundMinutes is max(critical path, total minutes / workers): no
// schedule can beat it. CriticalPath is the heaviest dependency chain, first
// task first.
func Simulate(tasks []planner.Task, workers int, opts *Opts) Schedule {
	workers = max(workers, 1)
	g := newGraph(tasks, opts)

	// The work: tasks not completed, minus those that can never start.
	indeg := make([]int, len(tasks))
	todo := make([]bool, len(tasks))
	for i := range tasks {
		todo[i] = tasks[i].Status != planner.StatusCompleted
	}
	never := make([]bool, len(tasks))
	for i := range tasks {
		if !todo[i] {
			continue
		}
		for _, d := range tasks[i].Dependencies {
			j, ok := g.byID[d]
			switch {
			case !ok:
				never[i] = true
			case todo[j]:
				indeg[i]++
			}
		}
	}
	// Kahn's order over the work decides what can ever run.
	left := slices.Clone(indeg)
	var queue []int
	for i := range tasks {
		if todo[i] && !never[i] && left[i] == 0 {
			queue = append(queue, i)
		}
	}
	runs := make([]bool, len(tasks))
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		runs[i] = true
		for _, j := range g.dependents[i] {
			if todo[j] && !never[j] {
				if left[j]--; left[j] == 0 {
					queue = append(queue, j)
				}
			}
		}
	}

	s := Schedule{Workers: workers, CriticalPath: []string{}}
	deps := make([][]int, len(tasks))
	w := make([]float64, len(tasks))
	total := 0.0
	for i := range tasks {
		if todo[i] && !runs[i] {
			s.Unscheduled = append(s.Unscheduled, tasks[i].ID)
			continue
		}
		if !runs[i] {
			continue
		}
		w[i] = Minutes(&tasks[i])
		total += w[i]
		for _, j := range g.dependents[i] {
			if runs[j] {
				deps[i] = append(deps[i], j)
			}
		}
	}
	chain := longestChains(deps, w)
	s.CriticalPath = criticalPath(g, deps, chain, runs)
	if len(s.CriticalPath) > 0 {
		s.LowerBoundMinutes = chain[g.byID[s.CriticalPath[0]]]
	}
	s.LowerBoundMinutes = max(s.LowerBoundMinutes, total/float64(workers))

	// The event loop.
	ready := &sliceHeap[int]{less: func(a, b int) bool { return g.compare(a, b) < 0 }}
	for i := range tasks {
		if runs[i] && indeg[i] == 0 {
			ready.items = append(ready.items, i)
		}
	}
	heap.Init(ready)
	free := &sliceHeap[int]{less: func(a, b int) bool { return a < b }}
	for k := range workers {
		free.items = append(free.items, k)
	}
	running := sliceHeap[slot]{less: earlierSlot}
	held := make(map[string]bool)
	now := 0.0
	var skipped []int
	for ready.Len() > 0 || running.Len() > 0 {
		// Give every free worker the first ready task whose files are free.
		for free.Len() > 0 && ready.Len() > 0 {
			pick := -1
			for ready.Len() > 0 {
				i := heap.Pop(ready).(int)
				if slices.ContainsFunc(g.files[i], func(f string) bool { return held[f] }) {
					skipped = append(skipped, i)
					continue
				}
				pick = i
				break
			}
			for _, i := range skipped {
				heap.Push(ready, i)
			}
			skipped = skipped[:0]
			if pick < 0 {
				break
			}
			for _, f := range g.files[pick] {
				held[f] = true
			}
			worker := heap.Pop(free).(int)
			a := Assignment{TaskID: tasks[pick].ID, Worker: worker, Start: now, End: now + w[pick]}
			s.Assignments = append(s.Assignments, a)
			heap.Push(&running, slot{task: pick, worker: worker, end: a.End})
		}
		if running.Len() == 0 {
			break // cannot happen: a free worker always takes a ready task
		}
		// Finish every task that ends at the next event time.
		now = running.items[0].end
		for running.Len() > 0 && running.items[0].end == now {
			r := heap.Pop(&running).(slot)
			heap.Push(free, r.worker)
			for _, f := range g.files[r.task] {
				delete(held, f)
			}
			for _, j := range deps[r.task] {
				if indeg[j]--; indeg[j] == 0 {
					heap.Push(ready, j)
				}
			}
		}
	}
	s.MakespanMinutes = now
	return s
}

// criticalPath follows the heaviest chain from its heaviest start; ties go
// to the smaller ID.
func criticalPath(g *graph, deps [][]int, chain []float64, runs []bool) []string {
	better := func(i, best int) bool {
		return best < 0 || chain[i] > chain[best] ||
			(chain[i] == chain[best] && CompareIDs(g.tasks[i].ID, g.tasks[best].ID) < 0)
	}
	start := -1
	for i := range chain {
		if runs[i] && better(i, start) {
			start = i
		}
	}
	path := []string{}
	for i := start; i >= 0; {
		path = append(path, g.tasks[i].ID)
		next := -1
		for _, j := range deps[i] {
			if better(j, next) {
				next = j
			}
		}
		i = next
	}
	return path
}

// sliceHeap is a container/heap of T ordered by less.
type sliceHeap[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (h *sliceHeap[T]) Len() int           { return len(h.items) }
func (h *sliceHeap[T]) Less(a, b int) bool { return h.less(h.items[a], h.items[b]) }
func (h *sliceHeap[T]) Swap(a, b int)      { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *sliceHeap[T]) Push(x any)         { h.items = append(h.items, x.(T)) }
func (h *sliceHeap[T]) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}

type slot struct {
	task, worker int
	end          float64
}

// earlierSlot orders running tasks by end time, then by worker.
func earlierSlot(a, b slot) bool {
	if a.end != b.end {
		return a.end < b.end
	}
	return a.worker < b.worker
}
