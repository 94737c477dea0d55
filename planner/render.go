package planner

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// tableTitleLen is the widest title the table prints.
const tableTitleLen = 50

// WriteTable prints the plan for a reader: one row per task (ID, title,
// priority, milestone, complexity total and level, dependencies, file
// count, and the task it was split from), then the splits, milestones,
// warnings, cycles and schedule, with its parallel waves when the
// schedule has them.
func (p *Plan) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTITLE\tPRIORITY\tMILESTONE\tCOMPLEXITY\tDEPS\tFILES\tSPLIT FROM")
	for i := range p.Tasks {
		t := &p.Tasks[i]
		deps := "-"
		if len(t.Dependencies) > 0 {
			deps = strings.Join(t.Dependencies, ",")
		}
		from := "-"
		if t.SplitFrom != "" {
			from = t.SplitFrom
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f %s\t%s\t%d\t%s\n",
			t.ID, shorten(t.Title, tableTitleLen), t.Priority, t.MilestoneID,
			t.Complexity.Total, t.Complexity.Level, deps, len(t.Files()), from)
	}
	tw.Flush()

	if len(p.Splits) > 0 {
		fmt.Fprintf(ew, "\nSplits (%d):\n", len(p.Splits))
		for _, s := range p.Splits {
			c := s.Complexity
			fmt.Fprintf(ew, "  %s -> %s  by %s (complexity %.2f %s: files %.2f, cross %.2f, semantic %.2f, uncertainty %.2f, tokens %.2f)\n",
				s.TaskID, strings.Join(s.Parts, ", "), s.Strategy, c.Total, c.Level,
				c.FileScope, c.CrossFileDeps, c.SemanticComplexity, c.RequirementUncertainty, c.TokenPenalty)
		}
	}
	fmt.Fprintf(ew, "\nMilestones (%d):\n", len(p.Milestones))
	for _, m := range p.Milestones {
		var ids []string
		for i := range p.Tasks {
			if p.Tasks[i].MilestoneID == m.ID {
				ids = append(ids, p.Tasks[i].ID)
			}
		}
		fmt.Fprintf(ew, "  %s %s [%s]: %d tasks\n", m.ID, m.Name, m.Status, len(ids))
	}
	if len(p.Warnings) > 0 {
		fmt.Fprintf(ew, "\nWarnings (%d):\n", len(p.Warnings))
		for _, s := range p.Warnings {
			fmt.Fprintf(ew, "  %s\n", s)
		}
	}
	if len(p.Cycles) > 0 {
		fmt.Fprintf(ew, "\nDependency cycles (%d):\n", len(p.Cycles))
		for _, c := range CyclePaths(p.Tasks, p.Cycles) {
			fmt.Fprintf(ew, "  %s\n", c)
		}
		return ew.err
	}
	s := p.Schedule
	total := 0.0
	for i := range p.Tasks {
		total += p.Tasks[i].EstimatedMinutes
	}
	fmt.Fprintf(ew, "\nSchedule: %d tasks, %.1f task-minutes; with %d worker(s) about %.1f minutes (lower bound %.1f)\n",
		len(p.Tasks), total, s.Workers, s.MakespanMinutes, s.LowerBoundMinutes)
	if len(s.CriticalPath) > 0 {
		fmt.Fprintf(ew, "Critical path: %s\n", strings.Join(s.CriticalPath, " -> "))
	}
	if len(s.Waves) > 0 {
		fmt.Fprintf(ew, "\nParallel waves with %d worker(s) (%d; a wave starts when the one before is integrated):\n", s.Workers, len(s.Waves))
		width := len(fmt.Sprint(len(s.Waves)))
		for i, wave := range s.Waves {
			fmt.Fprintf(ew, "  %*d  %s\n", width, i+1, strings.Join(wave, ", "))
		}
	}
	return ew.err
}

// WriteMermaid prints the dependency graph as a Mermaid flowchart: one
// subgraph per milestone, each task with its full title (escaped), an
// arrow from each dependency to its dependent, nodes colored by complexity
// level, the critical path's tasks outlined and its edges drawn thick and
// blue, and cycle edges in red.
func (p *Plan) WriteMermaid(w io.Writer) error {
	ew := &errWriter{w: w}
	node := make(map[string]string, len(p.Tasks))
	for i := range p.Tasks {
		node[p.Tasks[i].ID] = fmt.Sprintf("t%d", i)
	}
	fmt.Fprintln(ew, "flowchart TD")
	onPath := map[string]bool{}
	pathEdge := map[[2]string]bool{}
	if cp := p.Schedule.CriticalPath; len(cp) > 0 {
		fmt.Fprintf(ew, "  %%%% critical path: %s\n", strings.Join(cp, " -> "))
		for k, id := range cp {
			onPath[id] = true
			if k > 0 {
				pathEdge[[2]string{cp[k-1], id}] = true
			}
		}
	}
	placed := make([]bool, len(p.Tasks))
	writeNode := func(i int, indent string) {
		t := &p.Tasks[i]
		label := fmt.Sprintf("%s: %s<br/>%.2f %s", t.ID, t.Title, t.Complexity.Total, t.Complexity.Level)
		fmt.Fprintf(ew, "%s%s[\"%s\"]\n", indent, node[t.ID], mermaidEscape(label))
		placed[i] = true
	}
	for mi, m := range p.Milestones {
		fmt.Fprintf(ew, "  subgraph m%d[\"%s\"]\n", mi, mermaidEscape(m.ID+": "+m.Name))
		for i := range p.Tasks {
			if p.Tasks[i].MilestoneID == m.ID {
				writeNode(i, "    ")
			}
		}
		fmt.Fprintln(ew, "  end")
	}
	for i := range p.Tasks {
		if !placed[i] {
			writeNode(i, "  ")
		}
	}
	inCycle := map[[2]string]bool{}
	for _, c := range p.Cycles {
		for k := 0; k+1 < len(c); k++ {
			inCycle[[2]string{c[k], c[k+1]}] = true
		}
	}
	edge := 0
	var red, blue []int
	for i := range p.Tasks {
		t := &p.Tasks[i]
		for _, d := range t.Dependencies {
			from, ok := node[d]
			if !ok {
				continue
			}
			arrow := "-->"
			if pathEdge[[2]string{d, t.ID}] {
				arrow = "==>"
				blue = append(blue, edge)
			}
			fmt.Fprintf(ew, "  %s %s %s\n", from, arrow, node[t.ID])
			if inCycle[[2]string{t.ID, d}] {
				red = append(red, edge)
			}
			edge++
		}
	}
	classes := []struct {
		level Level
		name  string
		style string
	}{
		{LevelLow, "low", "fill:#d4edda,stroke:#28a745,color:#000"},
		{LevelMedium, "medium", "fill:#fff3cd,stroke:#d39e00,color:#000"},
		{LevelHigh, "high", "fill:#ffe0b2,stroke:#e8590c,color:#000"},
		{LevelCritical, "critical", "fill:#f8d7da,stroke:#c82333,color:#000"},
	}
	for _, c := range classes {
		fmt.Fprintf(ew, "  classDef %s %s\n", c.name, c.style)
	}
	for _, c := range classes {
		var ids []string
		for i := range p.Tasks {
			if p.Tasks[i].Complexity.Level == c.level {
				ids = append(ids, node[p.Tasks[i].ID])
			}
		}
		if len(ids) > 0 {
			fmt.Fprintf(ew, "  class %s %s\n", strings.Join(ids, ","), c.name)
		}
	}
	if len(onPath) > 0 {
		var ids []string
		for i := range p.Tasks {
			if onPath[p.Tasks[i].ID] {
				ids = append(ids, node[p.Tasks[i].ID])
			}
		}
		// After the level classes, so that its stroke wins over theirs.
		fmt.Fprintln(ew, "  classDef criticalPath stroke:#1c64f2,stroke-width:4px")
		fmt.Fprintf(ew, "  class %s criticalPath\n", strings.Join(ids, ","))
	}
	for _, l := range []struct {
		edges []int
		style string
	}{{blue, "stroke:#1c64f2,stroke-width:4px"}, {red, "stroke:#c82333,stroke-width:3px"}} {
		if len(l.edges) == 0 {
			continue
		}
		parts := make([]string, len(l.edges))
		for i, e := range l.edges {
			parts[i] = fmt.Sprint(e)
		}
		fmt.Fprintf(ew, "  linkStyle %s %s\n", strings.Join(parts, ","), l.style)
	}
	return ew.err
}

// mermaidEscape makes s safe inside a quoted Mermaid label: quotes, angle
// brackets and '#' (which starts an entity code) become entity codes, and
// line breaks spaces.
func mermaidEscape(s string) string {
	r := strings.NewReplacer(`"`, "#quot;", "\r\n", " ", "\n", " ", "<", "#lt;", ">", "#gt;", "#", "#35;")
	// Keep the <br/> line break the label uses on purpose.
	return strings.ReplaceAll(r.Replace(s), "#lt;br/#gt;", "<br/>")
}

func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return len(b), nil
	}
	n, err := e.w.Write(b)
	if err != nil {
		e.err = err
	}
	return n, err
}
