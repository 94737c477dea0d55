package planner

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFileDependencies(t *testing.T) {
	t.Parallel()
	withFiles := func(r RawTask, create, modify, tests []string) RawTask {
		r.FilesToCreate, r.FilesToModify, r.TestFiles = create, modify, tests
		return r
	}
	tests := []struct {
		name  string
		tasks []RawTask
		want  map[string][]string
	}{
		{
			name: "modifying a created file",
			tasks: []RawTask{
				withFiles(rt("T1"), []string{"a.go"}, nil, nil),
				withFiles(rt("T2"), nil, []string{"a.go"}, nil),
			},
			want: map[string][]string{"T1": {}, "T2": {"T1"}},
		},
		{
			name: "testing a created file",
			tasks: []RawTask{
				withFiles(rt("T1"), []string{"a_test.go"}, nil, nil),
				withFiles(rt("T2"), nil, nil, []string{"a_test.go"}),
			},
			want: map[string][]string{"T1": {}, "T2": {"T1"}},
		},
		{
			name: "a pytest node ID tests its file",
			tasks: []RawTask{
				withFiles(rt("T1"), []string{"tests/test_calc.py"}, nil, nil),
				withFiles(rt("T2"), nil, nil, []string{"tests/test_calc.py::test_add"}),
			},
			want: map[string][]string{"T1": {}, "T2": {"T1"}},
		},
		{
			name: "the creator may come later in plan order",
			tasks: []RawTask{
				withFiles(rt("T1"), nil, []string{"b.go"}, nil),
				withFiles(rt("T2"), []string{"b.go"}, nil, nil),
			},
			want: map[string][]string{"T1": {"T2"}, "T2": {}},
		},
		{
			name: "an explicit dependency is not repeated",
			tasks: []RawTask{
				withFiles(rt("T1"), []string{"a.go"}, nil, nil),
				withFiles(rt("T2", "T1"), nil, []string{"a.go"}, []string{"a.go"}),
			},
			want: map[string][]string{"T1": {}, "T2": {"T1"}},
		},
		{
			name: "own files and files nobody creates add nothing",
			tasks: []RawTask{
				withFiles(rt("T1"), []string{"a.go"}, []string{"go.mod"}, []string{"a.go"}),
				withFiles(rt("T2"), nil, []string{"go.mod"}, nil),
			},
			want: map[string][]string{"T1": {}, "T2": {}},
		},
		{
			name: "several creators",
			tasks: []RawTask{
				withFiles(rt("T1"), []string{"a.go"}, nil, nil),
				withFiles(rt("T2"), []string{"b.go"}, nil, nil),
				withFiles(rt("T3", "T2"), nil, []string{"b.go", "a.go"}, nil),
			},
			want: map[string][]string{"T1": {}, "T2": {}, "T3": {"T2", "T1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := build(t, rawPlan(tt.tasks...), nil)
			got := map[string][]string{}
			for _, task := range p.Tasks {
				got[task.ID] = task.Dependencies
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestCycles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tasks []RawTask
		want  [][]string
		msg   string
	}{
		{
			name:  "none",
			tasks: []RawTask{rt("T1"), rt("T2", "T1"), rt("T3", "T1", "T2")},
			want:  nil,
		},
		{
			name:  "one",
			tasks: []RawTask{rt("T1"), rt("T2", "T5"), rt("T3"), rt("T4"), rt("T5", "T2")},
			want:  [][]string{{"T2", "T5", "T2"}},
			msg:   "dependency cycle:\n  T2 -> T5 -> T2",
		},
		{
			name:  "a self-dependency",
			tasks: []RawTask{rt("T1", "T1"), rt("T2", "T1")},
			want:  [][]string{{"T1", "T1"}},
			msg:   "dependency cycle:\n  T1 -> T1",
		},
		{
			name:  "several, disjoint",
			tasks: []RawTask{rt("T1", "T3"), rt("T2", "T2"), rt("T3", "T1"), rt("T4", "T6"), rt("T5", "T4"), rt("T6", "T5")},
			want:  [][]string{{"T1", "T3", "T1"}, {"T2", "T2"}, {"T4", "T6", "T5", "T4"}},
			msg:   "3 dependency cycles:\n  T1 -> T3 -> T1\n  T2 -> T2\n  T4 -> T6 -> T5 -> T4",
		},
		{
			name:  "several sharing tasks",
			tasks: []RawTask{rt("T1", "T2", "T3"), rt("T2", "T1"), rt("T3", "T2")},
			want:  [][]string{{"T1", "T2", "T1"}, {"T1", "T3", "T2", "T1"}},
			msg:   "2 dependency cycles:\n  T1 -> T2 -> T1\n  T1 -> T3 -> T2 -> T1",
		},
		{
			name: "through a file-based dependency",
			tasks: func() []RawTask {
				a, b := rt("T1", "T2"), rt("T2")
				a.FilesToCreate = []string{"a.go"}
				b.FilesToModify = []string{"a.go"}
				return []RawTask{a, b}
			}(),
			want: [][]string{{"T1", "T2", "T1"}},
			msg:  "dependency cycle:\n  T1 -> T2 -> T1 (T1 creates a.go)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Build(rawPlan(tt.tasks...), nil)
			require.NotNil(t, p)
			if tt.want == nil {
				require.NoError(t, err)
				require.Empty(t, p.Cycles)
				return
			}
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrCycle))
			require.EqualError(t, err, tt.msg)
			require.Equal(t, tt.want, p.Cycles)
			require.Equal(t, Schedule{Workers: 1, CriticalPath: []string{}}, p.Schedule, "no schedule for a cyclic plan")
		})
	}
}

func TestCyclesAfterSplit(t *testing.T) {
	t.Parallel()
	// T2 depends on the split T1, and T1 on T2: the cycle goes through a part.
	p, err := Build(rawPlan(bigTask("T1", "T2"), rt("T2", "T1")), nil)
	require.ErrorIs(t, err, ErrCycle)
	require.Equal(t, []string{"T1-a", "T1-b", "T1-c", "T2"}, ids(p.Tasks))
	require.Equal(t, [][]string{{"T1-a", "T2", "T1-a"}, {"T1-a", "T2", "T1-b", "T1-a"}, {"T1-a", "T2", "T1-c", "T1-b", "T1-a"}}, p.Cycles)
}

func TestFindCyclesLimit(t *testing.T) {
	t.Parallel()
	// A complete graph on 8 tasks has far more than MaxCycles cycles.
	var tasks []Task
	for i := range 8 {
		task := Task{ID: string(rune('A' + i))}
		for j := range 8 {
			if j != i {
				task.Dependencies = append(task.Dependencies, string(rune('A'+j)))
			}
		}
		tasks = append(tasks, task)
	}
	require.Len(t, FindCycles(tasks), MaxCycles)
}

func TestUnknownDependency(t *testing.T) {
	t.Parallel()
	_, err := Build(rawPlan(rt("T1"), rt("T2"), rt("T3"), rt("T4", "T1", "T9")), nil)
	require.ErrorIs(t, err, ErrInvalidPlan)
	require.EqualError(t, err, `tasks[3].dependencies[1]: unknown task "T9"`)
}
