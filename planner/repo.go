package planner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/repomap"
)

// SourceKey is the key of RawPlan.Lines for a task's heading (file "") or
// for one of its files in a list ("files_to_create", "files_to_modify",
// "test_files").
func SourceKey(taskID, list, file string) string {
	if file == "" {
		return taskID
	}
	return taskID + "\x00" + list + "\x00" + file
}

// sourceLines turns the parser's JSON-path lines into SourceKey lines.
func (p *mdParser) sourceLines() map[string]int {
	out := map[string]int{}
	for i, t := range p.raw.Tasks {
		prefix := fmt.Sprintf("tasks[%d]", i)
		if n, ok := p.lines[prefix]; ok {
			out[SourceKey(t.ID, "", "")] = n
		}
		for _, l := range []struct {
			key   string
			files []string
		}{{"files_to_create", t.FilesToCreate}, {"files_to_modify", t.FilesToModify}, {"test_files", t.TestFiles}} {
			for j, f := range l.files {
				if n, ok := p.lines[fmt.Sprintf("%s.%s[%d]", prefix, l.key, j)]; ok {
					out[SourceKey(t.ID, l.key, NormalizePath(f))] = n
				}
			}
		}
	}
	return out
}

// repoWarnings reports, when the plan has a repository, the tasks that
// create a file that exists there and those that modify a file that neither
// exists nor is created by a task, each with the PRODUCT.md line it comes
// from when there is one.
func (r *resolved) repoWarnings(raw *RawPlan) []string {
	if r.repo == "" {
		return nil
	}
	created := map[string]bool{}
	for i := range raw.Tasks {
		for _, f := range raw.Tasks[i].FilesToCreate {
			created[f] = true
		}
	}
	exists := func(f string) bool {
		_, err := os.Lstat(filepath.Join(r.repo, filepath.FromSlash(f)))
		return err == nil
	}
	var out []string
	warn := func(id, list, file, msg string) {
		loc := ""
		if n := raw.Lines[SourceKey(id, list, file)]; n > 0 {
			loc = fmt.Sprintf("%s:%d: ", r.productName, n)
		} else if n := raw.Lines[SourceKey(id, "", "")]; n > 0 {
			loc = fmt.Sprintf("%s:%d: ", r.productName, n)
		}
		out = append(out, loc+msg)
	}
	// When replanning, a task the run completed made its files itself.
	done := map[string]bool{}
	for _, t := range r.current {
		if t.Status == StatusCompleted {
			done[t.ID] = true
		}
	}
	for i := range raw.Tasks {
		t := &raw.Tasks[i]
		if done[t.ID] {
			continue
		}
		for _, f := range t.FilesToCreate {
			if exists(f) {
				warn(t.ID, "files_to_create", f, fmt.Sprintf("%s creates %s, which already exists in the repository; list it in files_to_modify", t.ID, f))
			}
		}
		for _, f := range t.FilesToModify {
			if !created[f] && !exists(f) {
				warn(t.ID, "files_to_modify", f, fmt.Sprintf("%s modifies %s, which does not exist in the repository and no task creates it; list it in files_to_create", t.ID, f))
			}
		}
	}
	return out
}

// planningContext is what the breakdown prompt shows before the PRODUCT.md
// text: a run's current tasks (when replanning) and the repository map,
// which gets what the rest of the prompt leaves of max_input_tokens, and at
// least a quarter of it.
func (r *resolved) planningContext(ctx context.Context, text string) string {
	var b strings.Builder
	if len(r.current) > 0 {
		b.WriteString("The run already has the tasks below. Keep the ID of every task that stays the same; give a task whose ")
		b.WriteString("title or files changed its old ID; give new tasks IDs not listed here. Completed work is not redone.\n")
		for i := range r.current {
			t := &r.current[i]
			fmt.Fprintf(&b, "- %s [%s] %s (files: %s)\n", t.ID, t.Status, t.Title, strings.Join(t.Files(), ", "))
		}
		b.WriteString("\n")
	}
	if r.repo == "" {
		return b.String()
	}
	m, err := repomap.Build(r.repo)
	if err != nil {
		r.logger.WarnContext(ctx, "planner: no repository map", slog.Any("error", err))
		return b.String()
	}
	used := llm.EstimateTokens(r.systemPrompt()) + llm.EstimateTokens(text) + llm.EstimateTokens(b.String()) + llm.EstimateTokens(BreakdownLine)
	budget := max(r.limits.MaxInputTokens-used, r.limits.MaxInputTokens/4)
	if s := m.Render(budget); s != "" {
		b.WriteString(s)
		b.WriteString("\n")
	}
	return b.String()
}
