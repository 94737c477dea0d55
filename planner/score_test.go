package planner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLevelOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		total float64
		want  Level
	}{
		{0, LevelLow}, {4.99, LevelLow}, {5, LevelMedium}, {7.99, LevelMedium},
		{8, LevelHigh}, {10.99, LevelHigh}, {11, LevelCritical}, {13, LevelCritical},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, LevelOf(tt.total), "LevelOf(%g)", tt.total)
	}
}

func TestScoreBoundaries(t *testing.T) {
	t.Parallel()
	sem := func(n int) []string {
		words := []string{"algorithm", "concurrent", "cache", "encryption", "transaction"}
		return []string{"Uses " + joinWords(words[:n])}
	}
	tests := []struct {
		name   string
		task   Task
		want   Complexity
		wantLv Level
	}{
		{
			name: "empty task",
			task: Task{Title: "x", UserStory: "story"},
			want: Complexity{},
		},
		{
			name: "just under MEDIUM: 9 files and a semantic word in the title",
			task: Task{Title: "cache layer", UserStory: "story", FilesToCreate: files(9, 1)},
			want: Complexity{FileScope: 4.5, SemanticComplexity: 0.25, Total: 4.75},
		},
		{
			name: "MEDIUM at 5: 10 files",
			task: Task{Title: "x", UserStory: "story", FilesToCreate: files(10, 1)},
			want: Complexity{FileScope: 5, Total: 5},
		},
		{
			name: "file scope caps at 5",
			task: Task{Title: "x", UserStory: "story", FilesToCreate: files(12, 1)},
			want: Complexity{FileScope: 5, Total: 5},
		},
		{
			name: "just under HIGH: 2 directories and 3 semantic words",
			task: Task{Title: "x", UserStory: "story", FilesToCreate: files(10, 2), AcceptanceCriteria: sem(3)},
			want: Complexity{FileScope: 5, CrossFileDeps: 0.5, SemanticComplexity: 2.25, Total: 7.75},
		},
		{
			name: "HIGH at 8: plus a vague word in the title",
			task: Task{Title: "maybe", UserStory: "story", FilesToCreate: files(10, 2), AcceptanceCriteria: sem(3)},
			want: Complexity{FileScope: 5, CrossFileDeps: 0.5, SemanticComplexity: 2.25, RequirementUncertainty: 0.25, Total: 8},
		},
		{
			name: "just under CRITICAL",
			task: Task{Title: "maybe", UserStory: "story", FilesToCreate: files(10, 5), AcceptanceCriteria: []string{sem(4)[0] + " etc"}},
			want: Complexity{FileScope: 5, CrossFileDeps: 2, SemanticComplexity: 3, RequirementUncertainty: 0.75, Total: 10.75},
		},
		{
			name: "CRITICAL at 11",
			task: Task{Title: "maybe, somehow", UserStory: "story", FilesToCreate: files(10, 5), AcceptanceCriteria: []string{sem(4)[0] + " etc"}},
			want: Complexity{FileScope: 5, CrossFileDeps: 2, SemanticComplexity: 3, RequirementUncertainty: 1, Total: 11},
		},
		{
			name: "every component at its cap: 13",
			task: Task{Title: "x", FilesToModify: files(16, 8), AcceptanceCriteria: []string{sem(5)[0] + " etc, tbd, maybe, somehow?"}},
			want: Complexity{FileScope: 5, CrossFileDeps: 2, SemanticComplexity: 3, RequirementUncertainty: 2, TokenPenalty: 1, Total: 13},
		},
		{
			name: "no user story adds uncertainty",
			task: Task{Title: "x"},
			want: Complexity{RequirementUncertainty: 0.5, Total: 0.5},
		},
		{
			name: "token penalty 0.5 just over the budget",
			task: Task{Title: "x", UserStory: "s", FilesToModify: files(10, 1)},
			want: Complexity{FileScope: 5, TokenPenalty: 0.5, Total: 5.5},
		},
		{
			name: "layers count toward cross_file_deps",
			task: Task{Title: "x", UserStory: "s", FilesToCreate: []string{"app/models/user.go", "app/models/user_view.html"}},
			want: Complexity{FileScope: 1, CrossFileDeps: 0.5, Total: 1.5},
		},
		{
			name: "a keyword in criteria and title counts once, at the criteria rate",
			task: Task{Title: "cache", UserStory: "s", AcceptanceCriteria: []string{"a cache"}},
			want: Complexity{SemanticComplexity: 0.75, Total: 0.75},
		},
		{
			name: "keywords match whole words, in any inflection",
			task: Task{Title: "x", UserStory: "s", AcceptanceCriteria: []string{"cached asynchronously, retried by the algorithms team"}},
			// cached → cache, retried → retry, algorithms → algorithm;
			// asynchronously is another word than async.
			want: Complexity{SemanticComplexity: 2.25, Total: 2.25},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Score(&tt.task, nil)
			require.NoError(t, err)
			tt.want.Level = LevelOf(tt.want.Total)
			require.Equal(t, tt.want, got, "got %+v, want %+v", got, tt.want)
		})
	}
}

func joinWords(w []string) string {
	s := ""
	for i, x := range w {
		if i > 0 {
			s += " and "
		}
		s += x
	}
	return s
}

func TestScoreCustomKeywords(t *testing.T) {
	t.Parallel()
	task := &Task{Title: "x", UserStory: "s", AcceptanceCriteria: []string{"uses blockchain"}}
	got, err := Score(task, nil)
	require.NoError(t, err)
	require.Zero(t, got.SemanticComplexity, "default keywords")

	got, err = Score(task, &Opts{Keywords: &Keywords{Semantic: []string{"blockchain"}}})
	require.NoError(t, err)
	require.Equal(t, 0.75, got.SemanticComplexity, "custom semantic keyword")

	task.UserStory = ""
	got, err = Score(&Task{Title: "x", UserStory: "s", AcceptanceCriteria: []string{"etc"}}, &Opts{Keywords: &Keywords{Vague: []string{}}})
	require.NoError(t, err)
	require.Zero(t, got.RequirementUncertainty, "an empty vague list disables the heuristic")
}

func TestLayerOf(t *testing.T) {
	t.Parallel()
	r := resolvedT(t, nil)
	tests := map[string]layer{
		"migrations/001_init.sql":     layerData,
		"internal/store/sqlite.go":    layerData,
		"internal/api/handler.go":     layerPresentation,
		"web/templates/list.html":     layerPresentation,
		"internal/service/todos.go":   layerBusiness,
		"internal/todo/todo.go":       layerNone,
		"internal/store/http_view.go": layerPresentation, // base name beats directory
	}
	for f, want := range tests {
		require.Equal(t, want, r.kw.layerOf(f), "layerOf(%q)", f)
	}
}

func TestMinutesFor(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1.0, MinutesFor(0))
	require.Equal(t, 5.0, MinutesFor(5))
	require.Equal(t, 11.4, MinutesFor(13))
}

func TestLimitsValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, DefaultLimits().Validate())
	l := DefaultLimits()
	l.ComplexityThreshold = 20
	require.EqualError(t, l.Validate(), "task_size_limits.complexity_threshold: must be between 0 and 13, got 20")
	l = DefaultLimits()
	l.MaxFilesToModify = 0
	require.EqualError(t, l.Validate(), "task_size_limits.max_files_to_modify: must be at least 1, got 0")
}
