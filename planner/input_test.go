package planner

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// oneTaskMD is a minimal explicit task list; crlf and bom turn it into what
// an editor on Windows saves.
const oneTaskMD = "# App\n\n## Milestone M1: Core\n\n### Task T1: Store\n- acceptance_criteria:\n  - Saves items\n- files_to_create: ./src/a.go\n"

func TestForgivingMarkdown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		md           string
		wantCriteria []string
		wantFiles    []string
		wantWarnings []string
	}{
		{
			name:         "plain",
			md:           oneTaskMD,
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
		},
		{
			name:         "BOM and CRLF",
			md:           "\ufeff" + strings.ReplaceAll(oneTaskMD, "\n", "\r\n"),
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
		},
		{
			name: "checkboxes",
			md: "## Milestone M1: Core\n### Task T1: Store\n- acceptance_criteria:\n  - [ ] Saves items\n  - [x] Lists items\n  * [X] Deletes items\n" +
				"- [ ] files_to_create:\n  - [ ] `./src/a.go`\n",
			wantCriteria: []string{"Saves items", "Lists items", "Deletes items"},
			wantFiles:    []string{"src/a.go"},
		},
		{
			name:         "inline criterion with a checkbox",
			md:           "## Milestone M1: Core\n### Task T1: Store\n- acceptance_criteria: [ ] Saves items\n- files_to_create: src//x/../a.go\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
		},
		{
			name:         "near miss without Task",
			md:           "## Milestone M1: Core\n### T1: Store\n- acceptance_criteria: Saves items\n- files_to_create: src/a.go\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
			wantWarnings: []string{`PRODUCT.md:2: read heading "### T1: Store" as "### Task T1: Store"`},
		},
		{
			name:         "near miss with a dash",
			md:           "## Milestone M1: Core\n### Task T1 - Store\n- acceptance_criteria: Saves items\n- files_to_create: src/a.go\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
			wantWarnings: []string{`PRODUCT.md:2: read heading "### Task T1 - Store" as "### Task T1: Store"`},
		},
		{
			name:         "near miss in lower case, CRLF",
			md:           "## Milestone M1: Core\r\n### task T1: Store\r\n- acceptance_criteria: Saves items\r\n- files_to_create: src/a.go\r\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
			wantWarnings: []string{`PRODUCT.md:2: read heading "### task T1: Store" as "### Task T1: Store"`},
		},
		{
			name:         "near miss with the colon after Task",
			md:           "## Milestone M1: Core\n### Task: T1 Store\n- acceptance_criteria: Saves items\n- files_to_create: src/a.go\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
			wantWarnings: []string{`PRODUCT.md:2: read heading "### Task: T1 Store" as "### Task T1: Store"`},
		},
		{
			name:         "near miss with no separator after the ID",
			md:           "## Milestone M1: Core\n### Task T1 Store\n- acceptance_criteria: Saves items\n- files_to_create: src/a.go\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
			wantWarnings: []string{`PRODUCT.md:2: read heading "### Task T1 Store" as "### Task T1: Store"`},
		},
		// The markup a writer, or a model, puts around a task's ID.
		{
			name:         "near miss in bold",
			md:           "## Milestone M1: Core\n### **Task T1**: Store\n- acceptance_criteria: Saves items\n- files_to_create: src/a.go\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
			wantWarnings: []string{`PRODUCT.md:2: read heading "### **Task T1**: Store" as "### Task T1: Store"`},
		},
		{
			name:         "near miss numbered, the ID as code",
			md:           "## Milestone M1: Core\n### 1. Task `T1`: Store\n- acceptance_criteria: Saves items\n- files_to_create: src/a.go\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
			wantWarnings: []string{"PRODUCT.md:2: read heading \"### 1. Task `T1`: Store\" as \"### Task T1: Store\""},
		},
		{
			name:         "near miss with the ID in brackets",
			md:           "## Milestone M1: Core\n### [T1] Store\n- acceptance_criteria: Saves items\n- files_to_create: src/a.go\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
			wantWarnings: []string{`PRODUCT.md:2: read heading "### [T1] Store" as "### Task T1: Store"`},
		},
		{
			name:         "a closing run of # is no part of the title",
			md:           "## Milestone M1: Core ##\n### Task T1: Store ###\n- acceptance_criteria: Saves items\n- files_to_create: src/a.go\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
		},
		{
			name: "a task heading at level one is a warning",
			md: "## Milestone M1: Core\n### Task T1: Store\n- acceptance_criteria: Saves items\n- files_to_create: src/a.go\n" +
				"# Task T2: Index\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
			wantWarnings: []string{`PRODUCT.md:5: heading "# Task T2: Index" looks like a task but is not read as one (write "### Task T2: title")`},
		},
		{
			name: "near miss at the wrong level is a warning",
			md: "## Milestone M1: Core\n### Task T1: Store\n- acceptance_criteria: Saves items\n- files_to_create: src/a.go\n" +
				"#### Task T2: Index\n",
			wantCriteria: []string{"Saves items"},
			wantFiles:    []string{"src/a.go"},
			wantWarnings: []string{`PRODUCT.md:5: heading "#### Task T2: Index" looks like a task but is not read as one (write "### Task T2: title")`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.True(t, HasTaskList(tt.md))
			raw, err := ParseTaskList(tt.md)
			require.NoError(t, err)
			require.Len(t, raw.Tasks, 1)
			got := raw.Tasks[0]
			require.Equal(t, "T1", got.ID)
			require.Equal(t, "Store", got.Title)
			require.Equal(t, tt.wantCriteria, got.AcceptanceCriteria)
			require.Equal(t, tt.wantFiles, got.FilesToCreate)
			require.Equal(t, tt.wantWarnings, raw.Warnings)
			p, err := Build(raw, nil)
			require.NoError(t, err)
			for _, w := range tt.wantWarnings {
				require.Contains(t, p.Warnings, w, "Build passes the input's warnings on")
			}
		})
	}
}

func TestNearMissHeadingsNeverSilent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		md   string
		want []string
	}{
		{
			name: "lowercase task headings without milestones",
			md:   "# App\n\n### task t1: store\nSave things.\n\n### task t2 - index\n",
			want: []string{
				`PRODUCT.md:3: heading "### task t1: store" looks like a task but is not read as one (an explicit task list needs "### Task ID: title" under "## Milestone ID: name"); the whole file goes to the model`,
				`PRODUCT.md:6: heading "### task t2 - index" looks like a task but is not read as one (an explicit task list needs "### Task ID: title" under "## Milestone ID: name"); the whole file goes to the model`,
			},
		},
		{
			name: "wrong level under a milestone",
			md:   "## Milestone M1: Core\n#### Task T1: Store\n",
			want: []string{`PRODUCT.md:2: heading "#### Task T1: Store" looks like a task but is not read as one (an explicit task list needs "### Task ID: title" under "## Milestone ID: name"); the whole file goes to the model`},
		},
		{
			name: "prose headings are not tasks",
			md:   "# App\n## Tasks\n### Task list\n### Overview\n### 1. Goals\n## M1: first release\n",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.False(t, HasTaskList(tt.md))
			require.Equal(t, tt.want, TaskHeadingWarnings("", tt.md))
		})
	}
}

func TestBreakdownWarnsAboutNearMisses(t *testing.T) {
	t.Parallel()
	md := "# Notes app\n\n### t1: note model\n"
	m := scripted(t, matchAll, []string{goodReply})
	raw, err := Breakdown(t.Context(), m, md, &Opts{ProductName: "docs/PRODUCT.md"})
	require.NoError(t, err)
	requireGoodPlan(t, raw)
	require.Equal(t, []string{`docs/PRODUCT.md:3: heading "### t1: note model" looks like a task but is not read as one (an explicit task list needs "### Task ID: title" under "## Milestone ID: name"); the whole file goes to the model`}, raw.Warnings)
}

func TestMarkdownErrorsNameLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		md   string
		want []string
	}{
		{
			name: "unknown dependency, CRLF and BOM",
			md:   "\ufeff## Milestone M1: a\r\n### Task T1: a\r\n- acceptance_criteria: ok\r\n- dependencies:\r\n  - T1\r\n  - T9\r\n",
			want: []string{`PRODUCT.md:6: task T1 dependencies: unknown task "T9"`},
		},
		{
			name: "a file created twice, once as ./",
			md: "## Milestone M1: a\n### Task T1: a\n- acceptance_criteria: ok\n- files_to_create: src/a.go\n" +
				"### Task T2: b\n- acceptance_criteria: ok\n- files_to_create: ./src/a.go\n",
			want: []string{`PRODUCT.md:7: task T2 files_to_create: "src/a.go" is also created by task "T1" (PRODUCT.md:2); a file has one creator`},
		},
		{
			name: "a title too long",
			md:   "## Milestone M1: a\n\n### Task T1: " + strings.Repeat("x", 81) + "\n- acceptance_criteria: ok\n",
			want: []string{`PRODUCT.md:3: task T1 title: must be at most 80 characters, got 81`},
		},
		{
			name: "no tasks at all",
			md:   "## Milestone M1: a\n### Task T1: a\n- acceptance_criteria: ok\n- estimated_minutes: 0\n",
			want: []string{`PRODUCT.md:4: task T1 estimated_minutes: must be greater than 0 and at most 1440, got 0`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseTaskList(tt.md)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.want, ve.Lines())
		})
	}
}

func TestForgivingRawJSON(t *testing.T) {
	t.Parallel()
	const js = `{"milestones": [{"id": "M1", "name": "Core"}],
 "tasks": [
  {"id": "T1", "title": "Store", "acceptance_criteria": ["[ ] Saves items"], "files_to_create": ["./src/a.go"], "milestone_id": "M1"},
  {"id": "T2", "title": "Index", "acceptance_criteria": ["[x] Indexes items"], "files_to_modify": ["src/a.go"], "test_files": ["./src/./a_test.go"], "milestone_id": "M1"}]}`
	tests := []struct {
		name string
		data string
	}{
		{"plain", js},
		{"BOM", "\ufeff" + js},
		{"CRLF", strings.ReplaceAll(js, "\n", "\r\n")},
		{"BOM and CRLF", "\ufeff" + strings.ReplaceAll(js, "\n", "\r\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := FromRaw([]byte(tt.data), nil)
			require.NoError(t, err)
			require.Equal(t, []string{"Saves items"}, p.Tasks[0].AcceptanceCriteria)
			require.Equal(t, []string{"Indexes items"}, p.Tasks[1].AcceptanceCriteria)
			require.Equal(t, []string{"src/a.go"}, p.Tasks[0].FilesToCreate)
			require.Equal(t, []string{"src/a_test.go"}, p.Tasks[1].TestFiles)
			require.Equal(t, []string{"T1"}, p.Tasks[1].Dependencies, "./src/a.go and src/a.go are one file")
		})
	}
}

func TestNormalizePath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"./src/a.go": "src/a.go", "src//a.go": "src/a.go", " src/b/../a.go ": "src/a.go", "src/a.go": "src/a.go",
	} {
		require.Equal(t, want, NormalizePath(in), in)
	}
}

func TestCycleErrorFormat(t *testing.T) {
	t.Parallel()
	// A complete graph on 8 tasks has more than MaxCycles cycles.
	var many []RawTask
	all := []string{"T1", "T2", "T3", "T4", "T5", "T6", "T7", "T8"}
	for _, id := range all {
		many = append(many, rt(id, all...))
	}
	fileCycle := func() []RawTask {
		a, b := rt("T2", "T5"), rt("T5")
		a.FilesToCreate = []string{"./src/a.go"}
		b.FilesToCreate = []string{"src/routes.go"}
		b.FilesToModify = []string{"src/a.go"}
		return []RawTask{rt("T1"), a, b}
	}
	tests := []struct {
		name      string
		tasks     []RawTask
		wantFirst []string // the first lines of the error
		wantLast  string
		wantLines int
	}{
		{
			name:      "file-based edge names its file",
			tasks:     fileCycle(),
			wantFirst: []string{"dependency cycle:", "  T2 -> T5 -> T2 (T2 creates src/a.go)"},
			wantLast:  "  T2 -> T5 -> T2 (T2 creates src/a.go)",
			wantLines: 2,
		},
		{
			name:      "capped with a count",
			tasks:     many,
			wantFirst: []string{"100 dependency cycles:", "  T1 -> T1"},
			wantLast:  "  … and 90 more cycles",
			wantLines: 1 + MaxCyclesInError + 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Build(rawPlan(tt.tasks...), nil)
			require.True(t, errors.Is(err, ErrCycle))
			lines := strings.Split(err.Error(), "\n")
			require.Len(t, lines, tt.wantLines)
			require.Equal(t, tt.wantFirst, lines[:len(tt.wantFirst)])
			require.Equal(t, tt.wantLast, lines[len(lines)-1])
			var b strings.Builder
			require.NoError(t, p.WriteTable(&b))
			require.Contains(t, b.String(), strings.TrimSpace(tt.wantFirst[1])+"\n", "the table shows the same paths")
		})
	}
	// Without paths, the error still has one line per cycle.
	require.EqualError(t, &CycleError{Cycles: [][]string{{"T1", "T2", "T1"}, {"T3", "T3"}}}, "2 dependency cycles:\n  T1 -> T2 -> T1\n  T3 -> T3")
}
