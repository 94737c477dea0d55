package ui

import (
	"fmt"
	"slices"
	"sort"

	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

// Sizes of the drawn graph, in SVG user units.
const (
	nodeW     = 172
	nodeH     = 50
	colW      = 216
	rowH      = 66
	bandTitle = 26
	bandGap   = 14
	margin    = 16
)

// Layout is a plan drawn as a graph: columns are dependency layers (a task
// sits one column right of its deepest dependency), rows within a column
// are ordered to keep edges short, and each milestone is a horizontal band.
type Layout struct {
	Width, Height int
	Nodes         []LaidNode
	Edges         []LaidEdge
	Bands         []Band
	// CriticalPath is the plan's critical path with its workers, as plan
	// --json reports it.
	CriticalPath []string

	critical map[string]bool
}

// LaidNode is a task's box.
type LaidNode struct {
	ID, Title    string
	Layer, Row   int
	X, Y, W, H   int
	MilestoneID  string
	OnCritical   bool
	Dependencies []string
}

// LaidEdge is a dependency, drawn from the dependency to its dependent.
type LaidEdge struct {
	From, To string
	Path     string // SVG path data
	Critical bool   // both ends are consecutive on the critical path
}

// Band is a milestone's horizontal band.
type Band struct {
	ID, Name   string
	X, Y, W, H int
}

// LayoutPlan lays out tasks in plan order, grouped by milestones (in list
// order; tasks of no listed milestone go in a last band), with the
// critical path of the plan run by workers.
func LayoutPlan(tasks []planner.Task, milestones []planner.Milestone, workers int) Layout {
	lay := Layout{critical: map[string]bool{}}
	if len(tasks) == 0 {
		lay.CriticalPath = []string{}
		return lay
	}
	// The plan's critical path, whatever is done already: the schedule of
	// the tasks as planned.
	planned := make([]planner.Task, len(tasks))
	for i, t := range tasks {
		planned[i] = t
		planned[i].Status, planned[i].Attempts = planner.StatusPending, 0
	}
	lay.CriticalPath = scheduler.PlanSchedule(planned, milestones, max(workers, 1)).CriticalPath
	for _, id := range lay.CriticalPath {
		lay.critical[id] = true
	}
	at := make(map[string]int, len(tasks))
	for i, t := range tasks {
		at[t.ID] = i
	}
	deps := make([][]int, len(tasks)) // known dependencies, by index
	for i, t := range tasks {
		for _, d := range t.Dependencies {
			if j, ok := at[d]; ok && j != i {
				deps[i] = append(deps[i], j)
			}
		}
	}
	layers := longestPath(deps)

	// Bands: the milestones in order, then one for the rest.
	bandOf := make([]int, len(tasks))
	bandIdx := map[string]int{}
	for _, m := range milestones {
		if _, ok := bandIdx[m.ID]; !ok {
			bandIdx[m.ID] = len(lay.Bands)
			lay.Bands = append(lay.Bands, Band{ID: m.ID, Name: m.Name})
		}
	}
	other := -1
	for i, t := range tasks {
		b, ok := bandIdx[t.MilestoneID]
		if !ok {
			if other < 0 {
				other = len(lay.Bands)
				lay.Bands = append(lay.Bands, Band{ID: t.MilestoneID, Name: "other tasks"})
			}
			b = other
		}
		bandOf[i] = b
	}

	// Cells: the tasks of one band in one layer, in plan order to start.
	nLayers := slices.Max(layers) + 1
	cells := make([][][]int, len(lay.Bands))
	for b := range cells {
		cells[b] = make([][]int, nLayers)
	}
	for i := range tasks {
		cells[bandOf[i]][layers[i]] = append(cells[bandOf[i]][layers[i]], i)
	}
	order(cells, deps, bandOf)

	// Coordinates.
	lay.Nodes = make([]LaidNode, len(tasks))
	y := margin
	width := margin*2 + (nLayers-1)*colW + nodeW
	for b := range lay.Bands {
		rows := 0
		for l := range cells[b] {
			rows = max(rows, len(cells[b][l]))
		}
		if rows == 0 {
			continue
		}
		band := &lay.Bands[b]
		band.X, band.Y, band.W = margin/2, y, width-margin
		band.H = bandTitle + rows*rowH
		for l, cell := range cells[b] {
			for r, i := range cell {
				t := tasks[i]
				lay.Nodes[i] = LaidNode{ID: t.ID, Title: t.Title, Layer: l, Row: r, W: nodeW, H: nodeH,
					X: margin + l*colW, Y: y + bandTitle + r*rowH, MilestoneID: t.MilestoneID,
					OnCritical: lay.critical[t.ID], Dependencies: t.Dependencies}
			}
		}
		y += band.H + bandGap
	}
	lay.Bands = slices.DeleteFunc(lay.Bands, func(b Band) bool { return b.H == 0 })
	lay.Width, lay.Height = width, y-bandGap+margin

	next := map[string]string{}
	for i := 1; i < len(lay.CriticalPath); i++ {
		next[lay.CriticalPath[i-1]] = lay.CriticalPath[i]
	}
	for i, ds := range deps {
		to := lay.Nodes[i]
		for _, j := range ds {
			from := lay.Nodes[j]
			x1, y1 := from.X+from.W, from.Y+from.H/2
			x2, y2 := to.X, to.Y+to.H/2
			mid := (x1 + x2) / 2
			path := fmt.Sprintf("M%d %dC%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2, y2)
			if to.Layer <= from.Layer { // a cycle's back edge: around the top
				path = fmt.Sprintf("M%d %dC%d %d %d %d %d %d", from.X+from.W/2, from.Y, from.X, from.Y-rowH/2, to.X+to.W, to.Y-rowH/2, to.X+to.W/2, to.Y)
			}
			lay.Edges = append(lay.Edges, LaidEdge{From: from.ID, To: to.ID, Path: path, Critical: next[from.ID] == to.ID})
		}
	}
	return lay
}

// longestPath returns each node's layer: 0 without dependencies, else one
// more than its deepest dependency. An edge that closes a cycle is
// ignored (a plan with a cycle is escalated, and still drawn).
func longestPath(deps [][]int) []int {
	layer := make([]int, len(deps))
	state := make([]int8, len(deps)) // 0 new, 1 on the stack, 2 done
	var visit func(i int) int
	visit = func(i int) int {
		switch state[i] {
		case 1:
			return -1
		case 2:
			return layer[i]
		}
		state[i] = 1
		l := 0
		for _, j := range deps[i] {
			if d := visit(j); d >= 0 {
				l = max(l, d+1)
			}
		}
		state[i], layer[i] = 2, l
		return l
	}
	for i := range deps {
		visit(i)
	}
	return layer
}

// order sorts each cell by the barycentre of its tasks' dependencies (their
// mean position in the band-major order of the layers before), a few times
// over, so that edges cross less.
func order(cells [][][]int, deps [][]int, bandOf []int) {
	pos := make([]float64, len(deps))
	place := func() {
		for b, band := range cells {
			for _, cell := range band {
				for r, i := range cell {
					pos[i] = float64(b)*1000 + float64(r)
				}
			}
		}
	}
	place()
	for range 4 {
		for _, band := range cells {
			for _, cell := range band {
				bary := make(map[int]float64, len(cell))
				for r, i := range cell {
					if len(deps[i]) == 0 {
						bary[i] = float64(r)
						continue
					}
					sum := 0.0
					for _, j := range deps[i] {
						// A dependency in another band pulls toward that
						// band's edge, not its row.
						sum += pos[j] - float64(bandOf[i])*1000
					}
					bary[i] = sum / float64(len(deps[i]))
				}
				sort.SliceStable(cell, func(a, c int) bool { return bary[cell[a]] < bary[cell[c]] })
			}
		}
		place()
	}
}
