package ui_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/ui"
)

func TestLayoutPlan(t *testing.T) {
	t.Parallel()
	task := func(id, milestone string, deps ...string) planner.Task {
		return planner.Task{ID: id, MilestoneID: milestone, Dependencies: deps, EstimatedMinutes: 1}
	}
	for _, c := range []struct {
		name   string
		tasks  []planner.Task
		layers map[string]int
		bands  int
	}{
		{name: "empty"},
		{name: "chain", tasks: []planner.Task{task("A", "M1"), task("B", "M1", "A"), task("C", "M1", "B")},
			layers: map[string]int{"A": 0, "B": 1, "C": 2}, bands: 1},
		{name: "longest path wins", tasks: []planner.Task{task("A", "M1"), task("B", "M1", "A"), task("C", "M2", "A", "B")},
			layers: map[string]int{"A": 0, "B": 1, "C": 2}, bands: 2},
		{name: "unknown milestone and dependency", tasks: []planner.Task{task("A", ""), task("B", "MX", "A", "Z")},
			layers: map[string]int{"A": 0, "B": 1}, bands: 1},
		{name: "cycle still drawn", tasks: []planner.Task{task("A", "M1", "B"), task("B", "M1", "A")},
			layers: map[string]int{"A": 1, "B": 0}, bands: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			lay := ui.LayoutPlan(c.tasks, []planner.Milestone{{ID: "M1"}, {ID: "M2"}}, 2)
			require.Len(t, lay.Nodes, len(c.tasks))
			require.Len(t, lay.Bands, c.bands)
			got := map[string]int{}
			for _, n := range lay.Nodes {
				got[n.ID] = n.Layer
				require.True(t, n.X >= 0 && n.Y >= 0 && n.X+n.W <= lay.Width && n.Y+n.H <= lay.Height, "node %s outside the drawing", n.ID)
			}
			if c.layers == nil {
				c.layers = map[string]int{}
			}
			require.Equal(t, c.layers, got)
			for i, a := range lay.Nodes {
				for _, b := range lay.Nodes[i+1:] {
					require.False(t, a.X == b.X && a.Y == b.Y, "%s and %s overlap", a.ID, b.ID)
				}
			}
		})
	}
}
