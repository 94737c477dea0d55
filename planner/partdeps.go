package planner

import (
	"fmt"
	"strings"
)

// partParent returns the ID a part ID was made from ("T3" for "T3-a",
// "T3-a" for "T3-a-b"), or "" when id is not shaped like a part.
func partParent(id string) string {
	n := len(id)
	if n < 3 || id[n-2] != '-' || id[n-1] < 'a' || id[n-1] > 'z' {
		return ""
	}
	return id[:n-2]
}

// partOfKnown reports whether id is shaped like a part of one of the
// known task IDs: a dependency on it is checked after the split.
func partOfKnown(id string, known func(string) bool) bool {
	for p := partParent(id); p != ""; p = partParent(p) {
		if known(p) {
			return true
		}
	}
	return false
}

// resolvePartDeps checks the dependencies on split parts (T3-a), which
// exist only once the tasks are split. A dependency on a part the split
// did not make (T3 was not split, or made fewer parts) becomes a dependency
// on the nearest task or part that exists, with a warning that says so.
func resolvePartDeps(tasks []Task, children map[string][]string) []string {
	known := make(map[string]bool, len(tasks)+len(children))
	for i := range tasks {
		known[tasks[i].ID] = true
	}
	for id := range children {
		known[id] = true
	}
	var warnings []string
	for i := range tasks {
		t := &tasks[i]
		changed := false
		for j, d := range t.Dependencies {
			if known[d] {
				continue
			}
			a := partParent(d)
			for a != "" && !known[a] {
				a = partParent(a)
			}
			if a == "" {
				continue
			}
			why := fmt.Sprintf("%s was not split", a)
			if parts, ok := children[a]; ok {
				why = fmt.Sprintf("%s was split into %s", a, strings.Join(parts, ", "))
			}
			warnings = append(warnings, fmt.Sprintf("%s: depends on %s, which the plan does not have (%s); it depends on %s instead", t.ID, d, why, a))
			t.Dependencies[j] = a
			changed = true
		}
		if changed {
			seen := map[string]bool{}
			out := t.Dependencies[:0]
			for _, d := range t.Dependencies {
				if !seen[d] {
					seen[d] = true
					out = append(out, d)
				}
			}
			t.Dependencies = out
		}
	}
	return warnings
}
