package graphtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/taskloom/taskloom/graph"
)

// Task is one task of the taskloop workload. Nodes never modify a task:
// they write a changed copy.
type Task struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Status   string   `json:"status"`
	Attempts int      `json:"attempts"`
	Files    []string `json:"files"`
	Deps     []string `json:"deps"`
}

// Task statuses.
const (
	StatusPending    = "pending"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
)

// ErrNoneReady means no pending task has all its dependencies completed.
var ErrNoneReady = errors.New("taskloop: no task ready")

// Tasks returns the n tasks of the workload's input, in index order.
func Tasks(n int) []*Task {
	tasks := make([]*Task, n)
	for i := range n {
		t := &Task{
			ID:     TaskID(i),
			Title:  fmt.Sprintf("Implement step %04d of the taskloop benchmark workload", i),
			Status: StatusPending,
			Files:  []string{fmt.Sprintf("src/mod%02d/a.go", i%50), fmt.Sprintf("src/mod%02d/b.go", i%50), fmt.Sprintf("test/t%04d_test.go", i)},
			Deps:   []string{},
		}
		t.Title += strings.Repeat(".", 60-len(t.Title))
		if i >= 1 {
			t.Deps = append(t.Deps, TaskID(i-1))
		}
		if i >= 3 {
			t.Deps = append(t.Deps, TaskID(i-3))
		}
		tasks[i] = t
	}
	return tasks
}

// TaskID is the ID of the task at index i: "t" and i on 4 digits.
func TaskID(i int) string { return fmt.Sprintf("t%04d", i) }

// index returns the index of the task whose ID is id, the index the ID
// encodes once checked against the task there, or -1.
func index(tasks []*Task, id string) int {
	i, err := strconv.Atoi(strings.TrimPrefix(id, "t"))
	if err != nil || i < 0 || i >= len(tasks) || tasks[i].ID != id {
		return -1
	}
	return i
}

// SelectReady returns the ID of the first pending task whose dependencies
// are all completed: the select node's body.
func SelectReady(tasks []*Task) (string, error) {
	for _, t := range tasks {
		if t.Status != StatusPending {
			continue
		}
		if depsDone(t, func(id string) (string, bool) {
			if i := index(tasks, id); i >= 0 {
				return tasks[i].Status, true
			}
			return "", false
		}) {
			return t.ID, nil
		}
	}
	return "", ErrNoneReady
}

func depsDone(t *Task, status func(id string) (string, bool)) bool {
	for _, d := range t.Deps {
		if s, ok := status(d); !ok || s != StatusCompleted {
			return false
		}
	}
	return true
}

// Implement returns a copy of tasks in which the task id is in progress
// with one more attempt, and the log line: the implement node's body.
func Implement(tasks []*Task, id string) ([]*Task, string, error) {
	out, t, err := replace(tasks, id)
	if err != nil {
		return nil, "", err
	}
	t.Status = StatusInProgress
	t.Attempts++
	return out, LogLine(id, t.Attempts), nil
}

// LogLine is the log line of an attempt.
func LogLine(id string, attempt int) string {
	return "implement " + id + " attempt " + strconv.Itoa(attempt)
}

// Complete returns a copy of tasks in which the task id is completed: the
// verify node's body.
func Complete(tasks []*Task, id string) ([]*Task, error) {
	out, t, err := replace(tasks, id)
	if err != nil {
		return nil, err
	}
	t.Status = StatusCompleted
	return out, nil
}

// replace returns a shallow copy of tasks and a copy of the task id put in
// its place, for the caller to change.
func replace(tasks []*Task, id string) ([]*Task, *Task, error) {
	i := index(tasks, id)
	if i < 0 {
		return nil, nil, fmt.Errorf("taskloop: no task %q", id)
	}
	t := *tasks[i]
	out := slices.Clone(tasks)
	out[i] = &t
	return out, &t, nil
}

// AppendCompleted returns the completed IDs and id, the completed list
// verify writes. It appends in Go's way: the list it was given is not
// changed (its length is not), but the result may share its array, whose
// spare capacity it fills; only one branch writes completed, so nothing
// else appends to that array.
func AppendCompleted(completed []string, id string) []string {
	return append(completed, id)
}

// AnyPending reports whether a task is pending: the router's body.
func AnyPending(tasks []*Task) bool {
	return slices.ContainsFunc(tasks, func(t *Task) bool { return t.Status == StatusPending })
}

// Check verifies a final state of n tasks: completed lists every task in
// index order, the log has n lines, and every task is completed after one
// attempt. get returns the task with an ID.
func Check(n int, completed, log []string, get func(id string) (Task, bool)) error {
	if len(completed) != n || len(log) != n {
		return fmt.Errorf("completed %d, log %d, want %d", len(completed), len(log), n)
	}
	for i, id := range completed {
		if want := TaskID(i); id != want {
			return fmt.Errorf("completed[%d] = %s, want %s", i, id, want)
		}
		t, ok := get(id)
		if !ok || t.Status != StatusCompleted || t.Attempts != 1 {
			return fmt.Errorf("task %s: status %s attempts %d", id, t.Status, t.Attempts)
		}
	}
	return nil
}

// CheckArray is Check on tasks as an array.
func CheckArray(n int, tasks []*Task, completed, log []string) error {
	if len(tasks) != n {
		return fmt.Errorf("%d tasks, want %d", len(tasks), n)
	}
	return Check(n, completed, log, func(id string) (Task, bool) {
		if i := index(tasks, id); i >= 0 {
			return *tasks[i], true
		}
		return Task{}, false
	})
}

// ArrayState is the workload's state as the peers model it: tasks is an
// array that a write replaces.
type ArrayState struct {
	Tasks     graph.Value[[]*Task]  `json:"tasks"`
	Current   graph.Value[string]   `json:"current"`
	Completed graph.Value[[]string] `json:"completed"`
	Log       graph.Append[string]  `json:"log"`
}

// ArrayInput is the input state of an ArrayGraph run over tasks.
func ArrayInput(tasks []*Task) ArrayState {
	return ArrayState{Tasks: graph.V(tasks), Current: graph.V(""), Completed: graph.V([]string{})}
}

// CheckArrayState is CheckArray on an ArrayGraph's final state.
func CheckArrayState(n int, s ArrayState) error {
	return CheckArray(n, s.Tasks.Get(), s.Completed.Get(), s.Log.Items())
}

// ArrayGraph is the workload with tasks as an array replaced each step.
func ArrayGraph() *graph.Graph[ArrayState] {
	g := graph.New[ArrayState]()
	g.AddNode("select", func(_ context.Context, s ArrayState) (ArrayState, error) {
		var u ArrayState
		id, err := SelectReady(s.Tasks.Get())
		u.Current.Set(id)
		return u, err
	}, nil)
	g.AddNode("implement", func(_ context.Context, s ArrayState) (ArrayState, error) {
		var u ArrayState
		tasks, line, err := Implement(s.Tasks.Get(), s.Current.Get())
		u.Tasks.Set(tasks)
		u.Log.Add(line)
		return u, err
	}, nil)
	g.AddNode("verify", func(_ context.Context, s ArrayState) (ArrayState, error) {
		var u ArrayState
		id := s.Current.Get()
		tasks, err := Complete(s.Tasks.Get(), id)
		u.Tasks.Set(tasks)
		u.Completed.Set(AppendCompleted(s.Completed.Get(), id))
		return u, err
	}, nil)
	wireLoop(g, func(s ArrayState) bool { return AnyPending(s.Tasks.Get()) })
	return g
}

// wireLoop adds the edges START -> select -> implement -> verify and the
// router after verify: select while pending reports a pending task, else
// END.
func wireLoop[S any](g *graph.Graph[S], pending func(S) bool) {
	g.AddEdge(graph.START, "select")
	g.AddEdge("select", "implement")
	g.AddEdge("implement", "verify")
	g.AddRouter("verify", func(_ context.Context, s S) (string, error) {
		if pending(s) {
			return "select", nil
		}
		return graph.END, nil
	}, "select", graph.END)
}

// KeyedState is the workload's state in the shape the pipeline uses: tasks
// is a keyed collection whose writes replace single entries, and completed
// is an append field to which verify adds the one new ID.
type KeyedState struct {
	Tasks     graph.Keyed[Task]    `json:"tasks"`
	Current   graph.Value[string]  `json:"current"`
	Completed graph.Append[string] `json:"completed"`
	Log       graph.Append[string] `json:"log"`
}

// KeyedInput is the input state of a KeyedGraph run over tasks.
func KeyedInput(tasks []*Task) KeyedState {
	var s KeyedState
	for _, t := range tasks {
		s.Tasks.Put(t.ID, *t)
	}
	return s
}

// CheckKeyedState is Check on a KeyedGraph's final state.
func CheckKeyedState(n int, s KeyedState) error {
	if s.Tasks.Len() != n {
		return fmt.Errorf("%d tasks, want %d", s.Tasks.Len(), n)
	}
	return Check(n, s.Completed.Items(), s.Log.Items(), s.Tasks.Get)
}

// KeyedGraph is the workload with tasks as a keyed collection.
func KeyedGraph() *graph.Graph[KeyedState] {
	g := graph.New[KeyedState]()
	g.AddNode("select", func(_ context.Context, s KeyedState) (KeyedState, error) {
		var u KeyedState
		status := func(id string) (string, bool) {
			d, ok := s.Tasks.Get(id)
			return d.Status, ok
		}
		for id, t := range s.Tasks.All() {
			if t.Status == StatusPending && depsDone(&t, status) {
				u.Current.Set(id)
				return u, nil
			}
		}
		return u, ErrNoneReady
	}, nil)
	g.AddNode("implement", func(_ context.Context, s KeyedState) (KeyedState, error) {
		var u KeyedState
		t, err := currentTask(s)
		t.Status = StatusInProgress
		t.Attempts++
		u.Tasks.Put(t.ID, t)
		u.Log.Add(LogLine(t.ID, t.Attempts))
		return u, err
	}, nil)
	g.AddNode("verify", func(_ context.Context, s KeyedState) (KeyedState, error) {
		var u KeyedState
		t, err := currentTask(s)
		t.Status = StatusCompleted
		u.Tasks.Put(t.ID, t)
		u.Completed.Add(t.ID)
		return u, err
	}, nil)
	wireLoop(g, func(s KeyedState) bool {
		for _, t := range s.Tasks.All() {
			if t.Status == StatusPending {
				return true
			}
		}
		return false
	})
	return g
}

// currentTask returns a copy of the current task of a KeyedState.
func currentTask(s KeyedState) (Task, error) {
	id := s.Current.Get()
	t, ok := s.Tasks.Get(id)
	if !ok {
		return t, fmt.Errorf("taskloop: no task %q", id)
	}
	return t, nil
}
