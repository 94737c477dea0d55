package planner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/repomap"
)

// repoWith writes files (path -> content) into a new folder.
func repoWith(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	return dir
}

const repoProduct = `# Notes

## Milestone M1: Core

### Task T1: Note model
- acceptance_criteria: a note has a title
- files_to_create: notes/note.go
- test_files: notes/note_test.go

### Task T2: Note list
- acceptance_criteria: notes are listed
- files_to_create: notes/list.go
- files_to_modify:
  - notes/note.go
  - ./notes/store.go
`

func TestRepoWarnings(t *testing.T) {
	t.Parallel()
	dir := repoWith(t, map[string]string{"notes/note.go": "package notes\n"})
	p, err := FromProduct(t.Context(), nil, repoProduct, &Opts{Repo: dir, ProductName: "docs/PRODUCT.md"})
	require.NoError(t, err)
	require.Equal(t, []string{
		"docs/PRODUCT.md:7: T1 creates notes/note.go, which already exists in the repository; list it in files_to_modify",
		"docs/PRODUCT.md:15: T2 modifies notes/store.go, which does not exist in the repository and no task creates it; list it in files_to_create",
	}, p.Warnings, "notes/note.go is created by T1, so T2 may modify it")

	// Raw tasks JSON has no lines: the warning names the task alone.
	raw := rawPlan(RawTask{ID: "T1", Title: "x", MilestoneID: "M1", AcceptanceCriteria: []string{"x"}, FilesToCreate: []string{"notes/note.go"}})
	p = build(t, raw, &Opts{Repo: dir})
	require.Contains(t, p.Warnings, "T1 creates notes/note.go, which already exists in the repository; list it in files_to_modify")

	// Without a repository there is nothing to compare with.
	p, err = FromProduct(t.Context(), nil, repoProduct, nil)
	require.NoError(t, err)
	require.Empty(t, p.Warnings)

	// Replanning a run that completed T1: T1 made notes/note.go itself, and
	// the replan shows the plan's other warnings.
	old, err := FromProduct(t.Context(), nil, repoProduct, nil)
	require.NoError(t, err)
	current := runTasks(old, map[string]Status{"T1": StatusCompleted})
	opts := &Opts{Repo: dir, ProductName: "docs/PRODUCT.md", CurrentTasks: current}
	p, err = FromProduct(t.Context(), nil, repoProduct, opts)
	require.NoError(t, err)
	want := []string{"docs/PRODUCT.md:15: T2 modifies notes/store.go, which does not exist in the repository and no task creates it; list it in files_to_create"}
	require.Equal(t, want, p.Warnings)
	rp, err := ReplanPlan(current, old.Milestones, p, &ReplanOpts{Opts: opts})
	require.NoError(t, err)
	require.Equal(t, want, rp.Warnings)
}

func TestBreakdownPromptHasRepoMap(t *testing.T) {
	t.Parallel()
	dir := repoWith(t, map[string]string{
		"go.mod":              "module example.com/notes\n",
		"notes/note.go":       "package notes\n\n// Note is a note.\ntype Note struct{ Title string }\n\nfunc Parse(s string) Note { return Note{} }\n",
		"web/src/NoteList.ts": "export function NoteList() {}\n",
		"svc/notes.py":        "class NoteService:\n    pass\n",
	})
	// The scripted model answers only a prompt that shows the map, with
	// the symbols of the code that exists, before the PRODUCT.md.
	m := scripted(t, `Repository map[\s\S]*note\.go: Note, Parse[\s\S]*notes\.py: NoteService[\s\S]*NoteList\.ts: NoteList[\s\S]*`+matchAll, []string{goodReply})
	_, err := Breakdown(t.Context(), m, product, &Opts{Repo: dir})
	require.NoError(t, err)
	prompt := text(m.reqs[0][1])
	require.True(t, strings.HasSuffix(prompt, BreakdownLine+"\n\n"+product), "prompt contract: the line, then the PRODUCT.md")
}

func TestBreakdownRepoMapBounded(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for i := range 400 {
		files[fmt.Sprintf("pkg%03d/file%03d.go", i, i)] = fmt.Sprintf("package pkg%03d\n\nfunc Exported%03d() {}\n\ntype Type%03d struct{}\n", i, i, i)
	}
	dir := repoWith(t, files)
	full, err := repomap.Build(dir)
	require.NoError(t, err)
	require.Greater(t, llm.EstimateTokens(full.Render(1<<20)), 6000, "the whole map is larger than the default budget")

	for _, limit := range []int{6000, 1500} {
		lim := DefaultLimits()
		lim.MaxInputTokens = limit
		m := scripted(t, matchAll, []string{goodReply})
		_, err := Breakdown(t.Context(), m, product, &Opts{Repo: dir, Limits: &lim})
		require.NoError(t, err)
		prompt := text(m.reqs[0][1])
		i := strings.Index(prompt, repomap.Header)
		require.GreaterOrEqual(t, i, 0, "limit %d: the prompt has a map", limit)
		mapText := prompt[i:strings.Index(prompt, BreakdownLine)]
		require.LessOrEqual(t, llm.EstimateTokens(mapText), limit, "limit %d: the map fits max_input_tokens", limit)
		whole := llm.EstimateTokens(text(m.reqs[0][0])) + llm.EstimateTokens(prompt)
		require.LessOrEqual(t, whole, limit+10, "limit %d: the whole prompt fits max_input_tokens", limit)
		require.Contains(t, mapText, "pkg000/")
	}
}

func TestBreakdownPromptHasCurrentTasks(t *testing.T) {
	t.Parallel()
	current := []Task{{ID: "T1", Title: "Note model", Status: StatusCompleted, FilesToCreate: []string{"notes/note.go"}}}
	m := scripted(t, `- T1 \[completed\] Note model \(files: notes/note\.go\)[\s\S]*`+matchAll, []string{goodReply})
	_, err := Breakdown(t.Context(), m, product, &Opts{CurrentTasks: current})
	require.NoError(t, err)
}
