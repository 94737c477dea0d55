package planner

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseTaskListSample(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../cmd/taskloom/testdata/plan/PRODUCT_tasks.md")
	require.NoError(t, err)
	require.True(t, HasTaskList(string(data)))
	raw, err := ParseTaskList(string(data))
	require.NoError(t, err)
	four := 4.0
	want := &RawPlan{
		Milestones: []RawMilestone{
			{ID: "M1", Name: "Storage", Description: "Todo items and where they live."},
			{ID: "M2", Name: "HTTP API", Description: "Serve the todo list over HTTP"},
		},
		Tasks: []RawTask{
			{
				ID: "T1", Title: "Todo model and in-memory store",
				UserStory: "As a developer, I want a Todo type and a store, so that handlers can keep items",
				AcceptanceCriteria: []string{
					"A Todo has an ID, a title, a done flag and a creation time",
					"The store adds, lists, gets and deletes todos",
					"Getting an unknown ID returns ErrNotFound",
				},
				FilesToCreate: []string{"internal/todo/todo.go", "internal/todo/store.go"},
				FilesToModify: []string{},
				TestFiles:     []string{"internal/todo/store_test.go"},
				Dependencies:  []string{},
				MilestoneID:   "M1", Priority: PriorityHigh,
			},
			{
				ID: "T2", Title: "SQLite store with migrations",
				UserStory: "As a user, I want my todos saved on disk, so that they survive a restart",
				AcceptanceCriteria: []string{
					"The SQLite store implements the same interface as the in-memory store",
					"The migration creates the todos table",
					"Each write runs in a transaction",
				},
				FilesToCreate: []string{"internal/store/sqlite.go", "internal/store/migrations/001_todos.sql"},
				FilesToModify: []string{"internal/todo/store.go"},
				TestFiles:     []string{"internal/store/sqlite_test.go"},
				Dependencies:  []string{"T1"},
				MilestoneID:   "M1", Priority: PriorityMedium,
			},
			{
				ID: "T3", Title: "Todo REST API",
				UserStory:          "As a user, I want to manage my todos over HTTP, so that any client can use them",
				AcceptanceCriteria: []string{"GET /todos lists todos, newest first", "POST /todos creates a todo and returns 201"},
				FilesToCreate:      []string{"internal/api/handler.go", "internal/api/routes.go"},
				FilesToModify:      []string{"cmd/todo/main.go"},
				TestFiles:          []string{"internal/api/handler_test.go"},
				Dependencies:       []string{"T2"},
				MilestoneID:        "M2", Priority: PriorityHigh, EstimatedMinutes: &four,
			},
			{
				ID: "T4", Title: "README usage section",
				UserStory:          "As a new user, I want to know how to run the server, so that I can try it",
				AcceptanceCriteria: []string{"The README shows how to start the server and call each endpoint"},
				FilesToCreate:      []string{},
				FilesToModify:      []string{"README.md"},
				TestFiles:          []string{},
				Dependencies:       []string{},
				MilestoneID:        "M2", Priority: PriorityLow,
			},
		},
	}
	// Lines say where each task and file came from, for warnings.
	require.Equal(t, 36, raw.Lines[SourceKey("T3", "", "")])
	require.Equal(t, 39, raw.Lines[SourceKey("T3", "files_to_create", "internal/api/routes.go")])
	require.Equal(t, 51, raw.Lines[SourceKey("T4", "files_to_modify", "README.md")])
	raw.Lines = nil
	require.Equal(t, want, raw)
}

func TestParseTaskListErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, md string
		want     []string
	}{
		{
			name: "task outside a milestone",
			md:   "# X\n### Task T1: a\n- acceptance_criteria: ok\n",
			want: []string{`PRODUCT.md:2: task T1 is not under a "## Milestone ID: name" heading`},
		},
		{
			name: "unknown key and stray text",
			md:   "## Milestone M1: a\n### Task T1: a\n- prio: high\nsome text\n- just a bullet\n",
			want: []string{
				`PRODUCT.md:3: unknown key "prio" in task T1 (allowed: user_story, priority, acceptance_criteria, files_to_create, files_to_modify, test_files, dependencies, estimated_minutes)`,
				`PRODUCT.md:4: unexpected text in task T1: "some text" (task fields are "- key: value" items)`,
				`PRODUCT.md:5: expected "- key: value" in task T1, got "- just a bullet"`,
			},
		},
		{
			name: "nested item without a list key",
			md:   "## Milestone M1: a\n### Task T1: a\n- priority: high\n  - oops\n",
			want: []string{`PRODUCT.md:4: nested item "oops" in task T1 does not follow a list key (acceptance_criteria, files_to_create, files_to_modify, test_files, dependencies)`},
		},
		{
			name: "bad minutes",
			md:   "## Milestone M1: a\n### Task T1: a\n- estimated_minutes: soon\n",
			want: []string{`PRODUCT.md:3: estimated_minutes of task T1 must be a number, got "soon"`},
		},
		{
			name: "schema problems name their lines",
			md:   "## Milestone M1: a\n### Task T1: a\n- dependencies: T9\n",
			want: []string{"PRODUCT.md:2: task T1 acceptance_criteria: must have at least one criterion", `PRODUCT.md:3: task T1 dependencies: unknown task "T9"`},
		},
		{
			name: "headings in code fences are ignored",
			md:   "## Milestone M1: a\n```\n### Task T2: b\n```\n### Task T1: a\n- acceptance_criteria: ok\n",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, err := ParseTaskList(tt.md)
			if tt.want == nil {
				require.NoError(t, err)
				require.Len(t, raw.Tasks, 1)
				return
			}
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.want, ve.Lines())
		})
	}
	require.False(t, HasTaskList("# X\n```\n### Task T1: in a fence\n```\n"))
	require.False(t, HasTaskList("# X\n## Tasks\n- do things\n"))
}

func TestNeedsModelNamesNearMissHeadings(t *testing.T) {
	md := "# P\n\n### Task: T1 store\n- acceptance_criteria: a\n\n```\n### Task T9: in a fence\n```\n### task t2 - index\n"
	err := NeedsModel("nm.md", md, errors.New("no key"))
	require.EqualError(t, err, `nm.md has no explicit task list (nm.md:3, nm.md:9 look like task headings, but a task list needs "### Task ID: title" under "## Milestone ID: name"), so the breakdown needs a model: no key`)
	err = NeedsModel("prose.md", "# P\n\nA notes app.\n", errors.New("no key"))
	require.EqualError(t, err, "prose.md has no explicit task list, so the breakdown needs a model: no key")
}
