package planner

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const validRaw = `{"milestones": [{"id": "M1", "name": "Core"}],
 "tasks": [{"id": "T1", "title": "First", "acceptance_criteria": ["works"], "milestone_id": "M1"}]}`

func TestParseRawValid(t *testing.T) {
	t.Parallel()
	raw, err := ParseRaw([]byte(`{"milestones": [{"id": "M1", "name": "Core", "description": null}],
	 "tasks": [{"id": "T1", "title": "First", "user_story": "s", "acceptance_criteria": ["a", " a ", "b"],
	            "files_to_create": ["./x/a.go", "x/a.go"], "files_to_modify": null, "test_files": [],
	            "dependencies": [], "milestone_id": "M1", "priority": "high", "estimated_minutes": 3.5},
	           {"id": "T2", "title": "Second", "acceptance_criteria": ["c"], "milestone_id": "M1", "dependencies": ["T1", "T1"]}]}`))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, raw.Tasks[0].AcceptanceCriteria, "trimmed and deduplicated")
	require.Equal(t, []string{"x/a.go"}, raw.Tasks[0].FilesToCreate, "cleaned and deduplicated")
	require.Equal(t, 3.5, *raw.Tasks[0].EstimatedMinutes)
	require.Equal(t, []string{"T1"}, raw.Tasks[1].Dependencies)
	require.Nil(t, raw.Tasks[1].EstimatedMinutes)
}

func TestParseRawErrors(t *testing.T) {
	t.Parallel()
	task := func(fields string) string {
		return `{"milestones": [{"id": "M1", "name": "Core"}], "tasks": [
		  {"id": "T1", "title": "First", "acceptance_criteria": ["works"], "milestone_id": "M1"},
		  {` + fields + `}]}`
	}
	base := `"id": "T2", "title": "Second", "acceptance_criteria": ["works"], "milestone_id": "M1"`
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty input", ``, []string{"invalid JSON: the input is empty"}},
		{"syntax error", "{\n  \"tasks\": [}\n", []string{"invalid JSON at line 2, column 13: invalid character '}' looking for beginning of value"}},
		{"truncated", "{\"tasks\": [", []string{"invalid JSON at line 1, column 12: unexpected end of input (the JSON is truncated)"}},
		{"trailing data", validRaw + ` {}`, []string{"invalid JSON at line 2, column 101: unexpected data after the top-level value"}},
		{"top level not an object", `[]`, []string{`the top-level value must be an object with "milestones" and "tasks", got array`}},
		{"missing arrays", `{}`, []string{"milestones: required", "tasks: required"}},
		{"unknown top-level field", `{"milestones": [], "tasks": [], "extra": 1}`, []string{"extra: unknown field (allowed: milestones, tasks)"}},
		{"empty arrays", `{"milestones": [], "tasks": []}`, []string{
			"milestones: must have at least one milestone",
			"tasks: must have at least one task (taskloom never invents placeholder tasks)"}},
		{"wrong array type", `{"milestones": {}, "tasks": "T1"}`, []string{"milestones: must be an array, got object", "tasks: must be an array, got string"}},
		{"a valid second task", task(base), nil},
		{"missing required fields", task(`"user_story": "s"`), []string{
			"tasks[1].id: required", "tasks[1].title: required", "tasks[1].milestone_id: required", "tasks[1].acceptance_criteria: required"}},
		{"wrong types", task(`"id": 2, "title": "Second", "acceptance_criteria": "works", "milestone_id": "M1", "files_to_create": [1, "a.go"], "estimated_minutes": "five", "priority": true`), []string{
			"tasks[1].acceptance_criteria: must be an array of strings, got string",
			"tasks[1].estimated_minutes: must be a number, got string",
			"tasks[1].files_to_create[0]: must be a string, got number",
			"tasks[1].id: must be a string, got number",
			"tasks[1].priority: must be a string, got boolean"}},
		// What models write now and then, read as meant.
		{"a number as a string and a priority in capitals", task(base + `, "estimated_minutes": "4", "priority": "High"`), nil},
		{"unknown task field", task(base + `, "status": "done"`), []string{
			"tasks[1].status: unknown field (allowed: id, title, user_story, acceptance_criteria, files_to_create, files_to_modify, test_files, dependencies, milestone_id, priority, estimated_minutes)"}},
		{"title too long", task(`"id": "T2", "title": "` + strings.Repeat("é", 81) + `", "acceptance_criteria": ["w"], "milestone_id": "M1"`), []string{
			"tasks[1].title: must be at most 80 characters, got 81"}},
		{"title of 80 is fine", task(`"id": "T2", "title": "` + strings.Repeat("é", 80) + `", "acceptance_criteria": ["w"], "milestone_id": "M1"`), nil},
		{"duplicate ID", task(`"id": "T1", "title": "Again", "acceptance_criteria": ["w"], "milestone_id": "M1"`), []string{
			`tasks[1].id: duplicate task ID "T1" (also tasks[0])`}},
		// A task of that ID would be taken for a bisection's revert.
		{"reserved ID", task(`"id": "Revert", "title": "x", "acceptance_criteria": ["w"], "milestone_id": "M1"`), []string{
			`tasks[1].id: "Revert" names taskloom's own build and revert commits on the branch: give the task another ID`}},
		{"bad ID", task(`"id": "T 2", "title": "x", "acceptance_criteria": ["w"], "milestone_id": "M1"`), []string{
			`tasks[1].id: must match ^[A-Za-z0-9][A-Za-z0-9_.-]*$ (letters, digits, '_', '.', '-'), got "T 2"`}},
		{"unknown milestone", task(`"id": "T2", "title": "x", "acceptance_criteria": ["w"], "milestone_id": "M9"`), []string{
			`tasks[1].milestone_id: unknown milestone "M9"`}},
		{"unknown dependency", task(base + `, "dependencies": ["T1", "T9"]`), []string{`tasks[1].dependencies[1]: unknown task "T9"`}},
		{"no criteria", task(`"id": "T2", "title": "x", "acceptance_criteria": [], "milestone_id": "M1"`), []string{
			"tasks[1].acceptance_criteria: must have at least one criterion"}},
		{"empty criterion", task(`"id": "T2", "title": "x", "acceptance_criteria": ["ok", " "], "milestone_id": "M1"`), []string{
			"tasks[1].acceptance_criteria[1]: must not be empty"}},
		{"bad priority", task(base + `, "priority": "urgent"`), []string{`tasks[1].priority: must be one of critical, high, medium, low, got "urgent"`}},
		{"bad minutes", task(base + `, "estimated_minutes": 0`), []string{"tasks[1].estimated_minutes: must be greater than 0 and at most 1440, got 0"}},
		{"bad paths", task(base + `, "files_to_create": ["/etc/passwd", "../x.go", "."], "test_files": ["a\\b.go"]`), []string{
			`tasks[1].files_to_create[0]: "/etc/passwd" must be a relative path inside the repository (no leading '/', no '..', no '\')`,
			`tasks[1].files_to_create[1]: "../x.go" must be a relative path inside the repository (no leading '/', no '..', no '\')`,
			`tasks[1].files_to_create[2]: "." is not a file path`,
			`tasks[1].test_files[0]: "a\\b.go" must be a relative path inside the repository (no leading '/', no '..', no '\')`}},
		{"two creators", `{"milestones": [{"id": "M1", "name": "Core"}], "tasks": [
		  {"id": "T1", "title": "a", "acceptance_criteria": ["w"], "milestone_id": "M1", "files_to_create": ["a.go"]},
		  {"id": "T2", "title": "b", "acceptance_criteria": ["w"], "milestone_id": "M1", "files_to_create": ["./a.go"]}]}`, []string{
			`tasks[1].files_to_create[0]: "a.go" is also created by task "T1" (tasks[0]); a file has one creator`}},
		{"milestone problems", `{"milestones": [{"id": "M1"}, {"id": "M1", "name": "x", "owner": "me"}], "tasks": [
		  {"id": "T1", "title": "a", "acceptance_criteria": ["w"], "milestone_id": "M1"}]}`, []string{
			"milestones[0].name: required", "milestones[1].owner: unknown field (allowed: id, name, description)"}},
		{"duplicate milestone", `{"milestones": [{"id": "M1", "name": "a"}, {"id": "M1", "name": "b"}], "tasks": [
		  {"id": "T1", "title": "a", "acceptance_criteria": ["w"], "milestone_id": "M1"}]}`, []string{
			`milestones[1].id: duplicate milestone ID "M1" (also milestones[0])`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, err := ParseRaw([]byte(tt.in))
			if tt.want == nil {
				require.NoError(t, err)
				require.NotNil(t, raw)
				return
			}
			require.Nil(t, raw)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.True(t, errors.Is(err, ErrInvalidPlan))
			require.Equal(t, tt.want, ve.Lines())
		})
	}
}

func TestValidationErrorMessage(t *testing.T) {
	t.Parallel()
	var issues []Issue
	for i := range 12 {
		issues = append(issues, Issue{Path: "tasks", Msg: string(rune('a' + i))})
	}
	err := &ValidationError{Issues: issues}
	require.Equal(t, "tasks: a; tasks: b; tasks: c; tasks: d; tasks: e; tasks: f; tasks: g; tasks: h; tasks: i; tasks: j; and 2 more", err.Error())
}

func TestBuildDoesNotModifyRaw(t *testing.T) {
	t.Parallel()
	raw := rawPlan(rt("T1"), rt("T2", "T1", "T1"))
	raw.Tasks[0].FilesToCreate = []string{"./a.go"}
	_, err := Build(raw, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"./a.go"}, raw.Tasks[0].FilesToCreate)
	require.Equal(t, []string{"T1", "T1"}, raw.Tasks[1].Dependencies)
}
