package scheduler_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

const (
	pending    = planner.StatusPending
	inProgress = planner.StatusInProgress
	completed  = planner.StatusCompleted
	failed     = planner.StatusFailed
	blocked    = planner.StatusBlocked
	skipped    = planner.StatusSkipped
)

// tk builds a pending, medium-priority task; edit tweaks it.
func tk(id string, edit func(*planner.Task), deps ...string) planner.Task {
	t := planner.Task{ID: id, Status: pending, Priority: planner.PriorityMedium, Dependencies: deps}
	if edit != nil {
		edit(&t)
	}
	return t
}

func prio(p planner.Priority) func(*planner.Task) { return func(t *planner.Task) { t.Priority = p } }
func ms(m string) func(*planner.Task)             { return func(t *planner.Task) { t.MilestoneID = m } }
func st(s planner.Status) func(*planner.Task)     { return func(t *planner.Task) { t.Status = s } }
func mins(m float64) func(*planner.Task)          { return func(t *planner.Task) { t.EstimatedMinutes = m } }
func files(create, modify, test []string) func(*planner.Task) {
	return func(t *planner.Task) { t.FilesToCreate, t.FilesToModify, t.TestFiles = create, modify, test }
}
func all(edits ...func(*planner.Task)) func(*planner.Task) {
	return func(t *planner.Task) {
		for _, e := range edits {
			e(t)
		}
	}
}

func statuses(tasks []planner.Task) map[string]planner.Status {
	out := make(map[string]planner.Status, len(tasks))
	for _, t := range tasks {
		out[t.ID] = t.Status
	}
	return out
}

func TestAvailableOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tasks []planner.Task
		opts  *scheduler.Opts
		want  []string
	}{
		{
			name: "priority first",
			tasks: []planner.Task{
				tk("T1", prio(planner.PriorityLow)),
				tk("T2", prio(planner.PriorityCritical)),
				tk("T3", prio(planner.PriorityHigh)),
				tk("T4", prio("")),
				tk("T5", prio(planner.PriorityMedium)),
			},
			want: []string{"T2", "T3", "T5", "T1", "T4"},
		},
		{
			name: "priority is inherited from dependents",
			tasks: []planner.Task{
				tk("T1", prio(planner.PriorityLow)),
				tk("T2", prio(planner.PriorityCritical), "T1"),
				tk("T3", prio(planner.PriorityHigh)),
				tk("T4", prio(planner.PriorityLow)),
				tk("T5", prio(planner.PriorityCritical), "T4"),
			},
			want: []string{"T1", "T4", "T3"}, // T4 passes on T5's rank too
		},
		{
			name: "a completed dependent passes nothing on",
			tasks: []planner.Task{
				tk("T1", prio(planner.PriorityLow)),
				tk("T2", all(prio(planner.PriorityCritical), st(completed)), "T1"),
				tk("T3", prio(planner.PriorityHigh)),
			},
			want: []string{"T3", "T1"},
		},
		{
			name: "then milestone order, unlisted last",
			tasks: []planner.Task{
				tk("T1", ms("M3")),
				tk("T2", ms("M2")),
				tk("T3", ms("M1")),
				tk("T4", ms("")),
			},
			opts: &scheduler.Opts{MilestoneOrder: []string{"M2", "M1"}},
			want: []string{"T2", "T3", "T1", "T4"},
		},
		{
			name: "milestone is inherited from dependents",
			tasks: []planner.Task{
				tk("T1", ms("M2")),
				tk("T2", ms("M1"), "T1"),
				tk("T3", ms("M1")),
			},
			opts: &scheduler.Opts{MilestoneOrder: []string{"M1", "M2"}},
			want: []string{"T1", "T3"}, // T1's chain (2) beats T3's (1) within M1
		},
		{
			name: "then longest remaining chain in minutes",
			tasks: []planner.Task{
				tk("T1", mins(5)),
				tk("T2", mins(1)),
				tk("T3", mins(1), "T2"),
				tk("T4", mins(10), "T3"), // T2's chain: 1+1+10 = 12 > T1's 5
				tk("T5", mins(1), "T1"),
			},
			want: []string{"T2", "T1"},
		},
		{
			name: "chain counts tasks when there are no estimates",
			tasks: []planner.Task{
				tk("T1", nil),
				tk("T2", nil),
				tk("T3", nil, "T2"),
				tk("T4", nil, "T3"),
				tk("T5", nil, "T1"),
			},
			want: []string{"T2", "T1"},
		},
		{
			name: "completed dependents do not lengthen a chain",
			tasks: []planner.Task{
				tk("T1", nil),
				tk("T2", nil),
				tk("T3", st(completed)),
				tk("T4", nil, "T1", "T3"),
			},
			want: []string{"T1", "T2"},
		},
		{
			name: "then natural ID order",
			tasks: []planner.Task{
				tk("T10", nil), tk("T9", nil), tk("T1-b", nil), tk("T1-a", nil), tk("T2", nil),
			},
			want: []string{"T1-a", "T1-b", "T2", "T9", "T10"},
		},
		{
			name: "only pending tasks whose dependencies all completed",
			tasks: []planner.Task{
				tk("T1", st(completed)),
				tk("T2", st(inProgress)),
				tk("T3", nil, "T1"),
				tk("T4", nil, "T1", "T2"),
				tk("T5", st(failed)),
				tk("T6", st(blocked), "T5"),
				tk("T7", nil, "T99"),
				tk("T8", st(skipped)),
				tk("T9", nil, "T8"),
			},
			want: []string{"T3"},
		},
		{
			name: "a cycle among dependents does not hang",
			tasks: []planner.Task{
				tk("T1", nil),
				tk("T2", nil, "T1", "T3"),
				tk("T3", nil, "T2"),
			},
			want: []string{"T1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := scheduler.Available(tt.tasks, tt.opts)
			require.Equal(t, tt.want, got, "got %v, want %v", got, tt.want)
		})
	}
}

func TestSelectBatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tasks []planner.Task
		n     int
		want  []string
	}{
		{
			name:  "disjoint tasks up to n",
			tasks: []planner.Task{tk("T1", files([]string{"a"}, nil, nil)), tk("T2", files([]string{"b"}, nil, nil)), tk("T3", files([]string{"c"}, nil, nil))},
			n:     2,
			want:  []string{"T1", "T2"},
		},
		{
			name: "overlap in create, modify or test files is passed over",
			tasks: []planner.Task{
				tk("T1", files([]string{"a.go"}, []string{"x.go"}, []string{"a_test.go"})),
				tk("T2", files(nil, []string{"a.go"}, nil)),
				tk("T3", files(nil, nil, []string{"./x.go"})),
				tk("T4", files(nil, []string{"y.go"}, []string{"a_test.go"})),
				tk("T5", files([]string{"dir/../z.go"}, nil, nil)),
				tk("T6", files(nil, []string{"z.go"}, nil)),
			},
			n:    4,
			want: []string{"T1", "T5"},
		},
		{
			name: "files of in-progress tasks are taken",
			tasks: []planner.Task{
				tk("T1", all(st(inProgress), files(nil, []string{"a"}, nil))),
				tk("T2", files(nil, []string{"a"}, nil)),
				tk("T3", files(nil, []string{"b"}, nil)),
			},
			n:    3,
			want: []string{"T3"},
		},
		{
			name: "selection order decides who wins a file",
			tasks: []planner.Task{
				tk("T1", files(nil, []string{"a"}, nil)),
				tk("T2", all(prio(planner.PriorityCritical), files(nil, []string{"a"}, nil))),
			},
			n:    2,
			want: []string{"T2"},
		},
		{
			name:  "tasks without files never collide",
			tasks: []planner.Task{tk("T1", nil), tk("T2", nil)},
			n:     5,
			want:  []string{"T1", "T2"},
		},
		{
			name:  "n of zero selects nothing",
			tasks: []planner.Task{tk("T1", nil)},
			n:     0,
			want:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := scheduler.SelectBatch(tt.tasks, tt.n, nil)
			require.Equal(t, tt.want, got, "got %v, want %v", got, tt.want)
		})
	}
}

func TestAttemptMachine(t *testing.T) {
	t.Parallel()
	type step struct {
		action string // start, pass, fail, skip, retry, fix
		id     string
		arg    string
	}
	tests := []struct {
		name         string
		tasks        []planner.Task
		steps        []step
		wantErr      bool // the last step fails with a *TransitionError
		wantEscalate bool // the last fail escalates
		want         map[string]planner.Status
		check        func(t *testing.T, tasks []planner.Task)
	}{
		{
			name:  "start then pass",
			tasks: []planner.Task{tk("T1", func(t *planner.Task) { t.Error = "old" })},
			steps: []step{{"start", "T1", ""}, {"pass", "T1", ""}},
			want:  map[string]planner.Status{"T1": completed},
			check: func(t *testing.T, tasks []planner.Task) {
				require.Empty(t, tasks[0].Error)
				require.Zero(t, tasks[0].Attempts)
			},
		},
		{
			name:  "a failure below max attempts retries with the error",
			tasks: []planner.Task{tk("T1", func(t *planner.Task) { t.MaxAttempts = 2 })},
			steps: []step{{"start", "T1", ""}, {"fail", "T1", "tests failed"}},
			want:  map[string]planner.Status{"T1": pending},
			check: func(t *testing.T, tasks []planner.Task) {
				require.Equal(t, 1, tasks[0].Attempts)
				require.Equal(t, "tests failed", tasks[0].Error)
			},
		},
		{
			name:         "the last allowed failure escalates and blocks dependents transitively",
			tasks:        []planner.Task{tk("T1", func(t *planner.Task) { t.MaxAttempts = 2; t.Attempts = 1 }), tk("T2", nil, "T1"), tk("T3", nil, "T2"), tk("T4", nil)},
			steps:        []step{{"start", "T1", ""}, {"fail", "T1", "boom"}},
			wantEscalate: true,
			want:         map[string]planner.Status{"T1": failed, "T2": blocked, "T3": blocked, "T4": pending},
			check: func(t *testing.T, tasks []planner.Task) {
				require.Equal(t, 2, tasks[0].Attempts)
			},
		},
		{
			name:         "max attempts defaults to three",
			tasks:        []planner.Task{tk("T1", nil)},
			steps:        []step{{"start", "T1", ""}, {"fail", "T1", "1"}, {"start", "T1", ""}, {"fail", "T1", "2"}, {"start", "T1", ""}, {"fail", "T1", "3"}},
			wantEscalate: true,
			want:         map[string]planner.Status{"T1": failed},
		},
		{
			name:  "skip blocks dependents unless they are skipped too",
			tasks: []planner.Task{tk("T1", st(failed)), tk("T2", st(blocked), "T1"), tk("T3", nil, "T2"), tk("T4", st(skipped), "T1")},
			steps: []step{{"skip", "T1", ""}},
			want:  map[string]planner.Status{"T1": skipped, "T2": blocked, "T3": blocked, "T4": skipped},
		},
		{
			name:  "retry resets attempts, keeps the error, adds the note and unblocks",
			tasks: []planner.Task{tk("T1", all(st(failed), func(t *planner.Task) { t.Attempts = 3; t.Error = "boom" })), tk("T2", st(blocked), "T1")},
			steps: []step{{"retry", "T1", "use the v2 API"}},
			want:  map[string]planner.Status{"T1": pending, "T2": pending},
			check: func(t *testing.T, tasks []planner.Task) {
				require.Zero(t, tasks[0].Attempts)
				require.Equal(t, "boom", tasks[0].Error)
				require.Equal(t, "Reviewer note: use the v2 API", tasks[0].ImplementationNotes)
			},
		},
		{
			name:  "fix completes a failed task and makes its dependents available",
			tasks: []planner.Task{tk("T1", st(failed)), tk("T2", st(blocked), "T1"), tk("T3", st(blocked), "T2")},
			steps: []step{{"fix", "T1", ""}},
			want:  map[string]planner.Status{"T1": completed, "T2": pending, "T3": pending},
		},
		{
			name:    "start needs a pending task",
			tasks:   []planner.Task{tk("T1", st(completed))},
			steps:   []step{{"start", "T1", ""}},
			wantErr: true,
		},
		{
			name:    "pass needs an in-progress task",
			tasks:   []planner.Task{tk("T1", nil)},
			steps:   []step{{"pass", "T1", ""}},
			wantErr: true,
		},
		{
			name:    "fail needs an in-progress task",
			tasks:   []planner.Task{tk("T1", st(failed))},
			steps:   []step{{"fail", "T1", "x"}},
			wantErr: true,
		},
		{
			name:    "a running task cannot be skipped",
			tasks:   []planner.Task{tk("T1", st(inProgress))},
			steps:   []step{{"skip", "T1", ""}},
			wantErr: true,
		},
		{
			name:    "unknown task",
			tasks:   []planner.Task{tk("T1", nil)},
			steps:   []step{{"start", "T2", ""}},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := append([]planner.Task(nil), tt.tasks...)
			tasks := tt.tasks
			var escalate bool
			var err error
			for _, s := range tt.steps {
				var next []planner.Task
				switch s.action {
				case "start":
					next, err = scheduler.Start(tasks, s.id)
				case "pass":
					next, err = scheduler.Pass(tasks, s.id)
				case "fail":
					next, escalate, err = scheduler.Fail(tasks, s.id, s.arg)
				case "skip":
					next, err = scheduler.Skip(tasks, s.id)
				case "retry":
					next, err = scheduler.Retry(tasks, s.id, s.arg)
				case "fix":
					next, err = scheduler.Fix(tasks, s.id)
				default:
					t.Fatalf("unknown action %q", s.action)
				}
				if err != nil {
					break
				}
				tasks = next
			}
			require.Equal(t, before, tt.tasks, "the input list must not change")
			if tt.wantErr {
				var te *scheduler.TransitionError
				require.True(t, errors.As(err, &te), "got %v, want a *TransitionError", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantEscalate, escalate, "escalate")
			require.Equal(t, tt.want, statuses(tasks))
			if tt.check != nil {
				tt.check(t, tasks)
			}
		})
	}
}

func TestPropagate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tasks []planner.Task
		want  map[string]planner.Status
	}{
		{
			name:  "failed blocks the chain",
			tasks: []planner.Task{tk("A", st(failed)), tk("B", nil, "A"), tk("C", nil, "B"), tk("D", nil)},
			want:  map[string]planner.Status{"A": failed, "B": blocked, "C": blocked, "D": pending},
		},
		{
			name:  "skipped blocks pending dependents, not skipped ones",
			tasks: []planner.Task{tk("A", st(skipped)), tk("B", nil, "A"), tk("C", st(skipped), "A"), tk("D", nil, "C")},
			want:  map[string]planner.Status{"A": skipped, "B": blocked, "C": skipped, "D": blocked},
		},
		{
			name:  "recovered dependencies unblock",
			tasks: []planner.Task{tk("A", st(completed)), tk("B", st(blocked), "A"), tk("C", st(blocked), "B")},
			want:  map[string]planner.Status{"A": completed, "B": pending, "C": pending},
		},
		{
			name:  "in-progress and completed dependents are left alone",
			tasks: []planner.Task{tk("A", st(failed)), tk("B", st(inProgress), "A"), tk("C", st(completed), "A")},
			want:  map[string]planner.Status{"A": failed, "B": inProgress, "C": completed},
		},
		{
			name:  "unknown dependencies and cycles block nothing",
			tasks: []planner.Task{tk("A", nil, "Z"), tk("B", nil, "C"), tk("C", nil, "B")},
			want:  map[string]planner.Status{"A": pending, "B": pending, "C": pending},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := statuses(scheduler.Propagate(tt.tasks))
			require.Equal(t, tt.want, got, "got %v, want %v", got, tt.want)
		})
	}
}

func TestDeadlock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tasks []planner.Task
		want  string // "" means no deadlock
	}{
		{
			name:  "a failed dependency and a chain behind it",
			tasks: []planner.Task{tk("T1", st(completed)), tk("T2", st(failed), "T1"), tk("T3", st(blocked), "T1", "T2"), tk("T4", st(blocked), "T3", "T9")},
			want:  "deadlock: T3 waits on T2 (failed); T4 waits on T3 (blocked), T9 (unknown)",
		},
		{
			name:  "a cycle",
			tasks: []planner.Task{tk("T2", nil, "T5"), tk("T5", nil, "T2")},
			want:  "deadlock: T2 waits on T5 (pending); T5 waits on T2 (pending)",
		},
		{
			name:  "a skipped dependency",
			tasks: []planner.Task{tk("T1", st(skipped)), tk("T2", st(blocked), "T1")},
			want:  "deadlock: T2 waits on T1 (skipped)",
		},
		{
			name:  "something is available",
			tasks: []planner.Task{tk("T1", st(failed)), tk("T2", st(blocked), "T1"), tk("T3", nil)},
		},
		{
			name:  "something is in progress",
			tasks: []planner.Task{tk("T1", st(inProgress)), tk("T2", nil, "T1")},
		},
		{
			name:  "all done",
			tasks: []planner.Task{tk("T1", st(completed)), tk("T2", st(skipped))},
		},
		{
			name:  "only a failed task is an escalation, not a deadlock",
			tasks: []planner.Task{tk("T1", st(completed)), tk("T2", st(failed))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := scheduler.Deadlock(tt.tasks)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			var de *scheduler.DeadlockError
			require.True(t, errors.As(err, &de), "got %v, want a *DeadlockError", err)
			require.Equal(t, tt.want, err.Error())
		})
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		tasks []planner.Task
		want  scheduler.Summary
	}{
		{
			name: "design doc example",
			tasks: []planner.Task{
				tk("1", st(completed)), tk("2", st(completed)), tk("3", st(completed)), tk("4", st(completed)),
				tk("5", st(completed)), tk("6", st(completed)), tk("7", st(completed)),
				tk("8", nil), tk("9", nil), tk("10", st(failed)),
			},
			want: scheduler.Summary{Total: 10, Completed: 7, Pending: 2, Failed: 1, Percent: 70, Progress: "70%"},
		},
		{
			name:  "rounds down and does not count skipped",
			tasks: []planner.Task{tk("1", st(completed)), tk("2", st(skipped)), tk("3", st(inProgress)), tk("4", st(blocked)), tk("5", st(completed)), tk("6", st(completed))},
			want:  scheduler.Summary{Total: 6, Completed: 3, Skipped: 1, InProgress: 1, Blocked: 1, Percent: 50, Progress: "50%"},
		},
		{
			name:  "two of three",
			tasks: []planner.Task{tk("1", st(completed)), tk("2", st(completed)), tk("3", nil)},
			want:  scheduler.Summary{Total: 3, Completed: 2, Pending: 1, Percent: 66, Progress: "66%"},
		},
		{
			name: "empty",
			want: scheduler.Summary{Progress: "0%"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := scheduler.Summarize(tt.tasks)
			require.Equal(t, tt.want, got, "got %+v, want %+v", got, tt.want)
		})
	}
}

func TestCompareIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"T2", "T10", -1},
		{"T10", "T2", 1},
		{"T1", "T1", 0},
		{"T1-a", "T1-b", -1},
		{"T1", "T1-a", -1},
		{"T01", "T1", 1},
		{"A9", "B1", -1},
		{"T1-a-b", "T1-a-a", 1},
	}
	for _, tt := range tests {
		got := scheduler.CompareIDs(tt.a, tt.b)
		require.Equal(t, tt.want, got, "CompareIDs(%q, %q): got %d, want %d", tt.a, tt.b, got, tt.want)
	}
}
