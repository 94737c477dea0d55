// Package report says what the stored runs hold, for the commands that
// only read them: a run's status, the list of runs, a run's checkpoint
// history, and the export of a task's agent conversations. Each report is
// a value that prints as JSON, and as text with its Write method.
package report

import (
	"fmt"
	"strings"
	"time"
)

// localTime prints t in the local zone, or "-" when it is not set.
func localTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// dedupe drops repeated names, keeping the first of each.
func dedupe(names []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// idList joins ids, keeping the first keep of them.
func idList(ids []string, keep int) string {
	if len(ids) <= keep {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:keep], ", ") + fmt.Sprintf(", … %d more", len(ids)-keep)
}
