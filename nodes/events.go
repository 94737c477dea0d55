package nodes

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/planner"
)

// Types of RunEvent.
const (
	EventRunStarted     = "run_started"
	EventPlanReady      = "plan_ready"
	EventTaskStarted    = "task_started"
	EventWorkerActivity = "worker_activity"
	EventProviderWait   = "provider_wait"
	EventTaskVerified   = "task_verified"
	EventTaskIntegrated = "task_integrated"
	EventTaskEscalated  = "task_escalated"
	EventUsage          = "usage"
	EventRunFinished    = "run_finished"
)

// RunEvent is something that happened to a run's tasks, as a script
// follows it: run --json prints one per line. Which fields a type carries
// is the documented one; MarshalJSON writes those and no others.
type RunEvent struct {
	TS    time.Time
	RunID string
	Type  string

	TargetBranch string        // run_started
	Workers      int           // run_started
	Tasks        []PlannedTask // plan_ready
	Warnings     []string      // plan_ready
	TaskID       string
	Attempt      int
	Worker       int    // task_started: the worker's slot, from 1
	Tool         string // worker_activity
	Summary      string // worker_activity
	Host         string // worker_activity: host:pid of a worker in another process
	Reason       string // provider_wait, task_escalated, run_finished (failed or aborted: why)
	Seconds      float64
	Passed       bool   // task_verified
	Error        string // task_verified
	Commit       string // task_integrated
	Usage        UsageReport
	Status       string // run_finished
	ExitCode     int    // run_finished
}

// PlannedTask is a task as plan_ready lists it.
type PlannedTask struct {
	ID           string   `json:"id"`
	Title        string   `json:"title"`
	Dependencies []string `json:"dependencies"`
	Minutes      float64  `json:"estimated_minutes"`
}

// MarshalJSON writes ts, run_id, type and the fields of the event's type.
func (e RunEvent) MarshalJSON() ([]byte, error) {
	m := map[string]any{"ts": e.TS.UTC().Format(time.RFC3339Nano), "run_id": e.RunID, "type": e.Type}
	switch e.Type {
	case EventRunStarted:
		m["target_branch"], m["workers"] = e.TargetBranch, e.Workers
	case EventPlanReady:
		m["tasks"], m["warnings"] = nonNil(e.Tasks), nonNil(e.Warnings)
	case EventTaskStarted:
		m["task_id"], m["attempt"], m["worker"] = e.TaskID, e.Attempt, e.Worker
	case EventWorkerActivity:
		m["task_id"], m["attempt"], m["tool"], m["summary"] = e.TaskID, e.Attempt, e.Tool, e.Summary
		if e.Host != "" {
			m["host"] = e.Host
		}
	case EventProviderWait:
		m["reason"], m["seconds"] = e.Reason, e.Seconds
	case EventTaskVerified:
		m["task_id"], m["attempt"], m["passed"], m["error"] = e.TaskID, e.Attempt, e.Passed, e.Error
	case EventTaskIntegrated:
		m["task_id"], m["attempt"], m["commit"] = e.TaskID, e.Attempt, e.Commit
	case EventTaskEscalated:
		m["task_id"], m["reason"] = e.TaskID, e.Reason
	case EventUsage:
		m["usage"] = e.Usage
	case EventRunFinished:
		m["status"], m["exit_code"] = e.Status, e.ExitCode
		if e.Reason != "" {
			m["reason"] = e.Reason
		}
	}
	return json.Marshal(m)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Tracker follows a run through its graph events and turns them into
// RunEvents. It keeps the tasks as the run last showed them and which
// worker slot each running task holds. It is not safe for concurrent use.
type Tracker struct {
	RunID string
	// NowFunc reads the clock; nil means time.Now.
	NowFunc func() time.Time

	tasks    map[string]planner.Task
	order    []string
	attempts map[string]int       // the last attempt recorded, by task
	slots    []string             // the task each worker slot runs; "" is free
	since    map[string]time.Time // when each running task started
	running  map[string]int       // the attempt each running task runs
	// escalated holds the escalations reported and still waiting, by
	// task and reason: an update lists every waiting one, the new with
	// those of earlier batches.
	escalated map[string]bool
}

func (t *Tracker) now() time.Time {
	if t.NowFunc != nil {
		return t.NowFunc()
	}
	return time.Now()
}

// Event returns a new event of the run, of type typ, timed now.
func (t *Tracker) Event(typ string) RunEvent {
	return RunEvent{TS: t.now(), RunID: t.RunID, Type: typ}
}

func (t *Tracker) init() {
	if t.tasks == nil {
		t.tasks, t.attempts, t.since, t.running = map[string]planner.Task{}, map[string]int{}, map[string]time.Time{}, map[string]int{}
	}
}

// Seed starts from a stored state (a resumed run): tasks in progress get
// their slots again and a task_started event each.
func (t *Tracker) Seed(s State) []RunEvent {
	t.init()
	t.escalated = escalationKeys(s.Escalations.Get())
	for _, a := range s.Attempts.Values() {
		t.attempts[a.TaskID] = max(t.attempts[a.TaskID], a.Attempt)
	}
	var out []RunEvent
	for _, task := range s.Tasks.Values() {
		out = append(out, t.put(task, CurrentAttempt(s, task.ID))...)
	}
	return out
}

// Graph turns one graph event into RunEvents.
func (t *Tracker) Graph(e graph.Event) []RunEvent {
	t.init()
	var out []RunEvent
	switch e.Kind {
	case graph.EventUpdate:
		u, ok := e.Update.(State)
		if !ok {
			return nil
		}
		// A task that starts in the update that records its attempt (a
		// retry routed straight back to implement_task) runs that attempt,
		// not the one after it.
		recorded := map[string]int{}
		for _, a := range u.Attempts.Values() {
			t.attempts[a.TaskID] = max(t.attempts[a.TaskID], a.Attempt)
			recorded[a.TaskID] = max(recorded[a.TaskID], a.Attempt)
			out = append(out, t.attempt(e.Node, a)...)
		}
		planned := e.Node == NodeBreakdown && u.Tasks.Len() > 0
		for _, task := range u.Tasks.Values() {
			n, ok := recorded[task.ID]
			if !ok {
				n = t.attempts[task.ID] + 1
			}
			out = append(out, t.put(task, n)...)
		}
		if planned {
			ev := t.Event(EventPlanReady)
			for _, id := range t.order {
				task := t.tasks[id]
				ev.Tasks = append(ev.Tasks, PlannedTask{ID: id, Title: task.Title, Dependencies: nonNil(task.Dependencies), Minutes: task.EstimatedMinutes})
			}
			ev.Warnings = u.Warnings.Get()
			out = append([]RunEvent{ev}, out...)
		}
		if u.Escalations.IsSet() {
			escs := u.Escalations.Get()
			for _, esc := range escs {
				if !t.escalated[esc.TaskID+"\x00"+esc.Reason] {
					ev := t.Event(EventTaskEscalated)
					ev.TaskID, ev.Reason = esc.TaskID, esc.Reason
					out = append(out, ev)
				}
			}
			t.escalated = escalationKeys(escs)
		}
	}
	return out
}

func escalationKeys(escs []Escalation) map[string]bool {
	keys := make(map[string]bool, len(escs))
	for _, esc := range escs {
		keys[esc.TaskID+"\x00"+esc.Reason] = true
	}
	return keys
}

// attempt reports what an attempt record written by node says: verified,
// integrated.
func (t *Tracker) attempt(node string, a Attempt) []RunEvent {
	switch node {
	case NodeVerify, NodeVerifyParallel:
		if a.Question != "" || a.ProviderError != "" {
			return nil
		}
		ev := t.Event(EventTaskVerified)
		ev.TaskID, ev.Attempt, ev.Passed = a.TaskID, a.Attempt, a.Verified && a.Error == ""
		if !ev.Passed {
			ev.Error = clip.Line(a.Error, 160)
			if ev.Error == "" && a.Tests != nil {
				ev.Error = clip.Line(a.Tests.ErrorContext(400), 160)
			}
		}
		return []RunEvent{ev}
	case NodeIntegrate:
		if a.Integrated == "" && a.Error != "" {
			// It passed its tests, then could not be integrated (a
			// conflict with main): the verdict that counts is this one.
			ev := t.Event(EventTaskVerified)
			ev.TaskID, ev.Attempt, ev.Error = a.TaskID, a.Attempt, clip.Line(a.Error, 160)
			return []RunEvent{ev}
		}
		if a.Integrated == "" {
			return nil
		}
		ev := t.Event(EventTaskIntegrated)
		ev.TaskID, ev.Attempt, ev.Commit = a.TaskID, a.Attempt, a.Integrated
		return []RunEvent{ev}
	}
	return nil
}

// put records a task's new state; a task that starts, with attempt, takes
// a free worker slot, one that stops gives it back.
func (t *Tracker) put(task planner.Task, attempt int) []RunEvent {
	old, seen := t.tasks[task.ID]
	if !seen {
		t.order = append(t.order, task.ID)
	}
	t.tasks[task.ID] = task
	running := task.Status == planner.StatusInProgress
	// A task that stays in progress but runs a new attempt was retried
	// between two looks at the run (a page that polls the store sees only
	// the attempt number move): the new attempt starts in the same slot.
	again := running && attempt > 0 && t.slot(task.ID) > 0 && attempt != t.running[task.ID]
	if seen && old.Status == task.Status && (running == (t.slot(task.ID) > 0)) && !again {
		return nil
	}
	if !running {
		if i := t.slot(task.ID); i > 0 {
			t.slots[i-1] = ""
			delete(t.since, task.ID)
			delete(t.running, task.ID)
		}
		return nil
	}
	i := t.slot(task.ID)
	if i > 0 && !again {
		return nil
	}
	if i == 0 {
		if i = t.slot(""); i == 0 {
			t.slots = append(t.slots, "")
			i = len(t.slots)
		}
	}
	t.slots[i-1] = task.ID
	t.since[task.ID] = t.now()
	t.running[task.ID] = attempt
	ev := t.Event(EventTaskStarted)
	ev.TaskID, ev.Attempt, ev.Worker = task.ID, t.running[task.ID], i
	return []RunEvent{ev}
}

// slot returns the 1-based worker slot running id, 0 if none.
func (t *Tracker) slot(id string) int {
	for i, s := range t.slots {
		if s == id {
			return i + 1
		}
	}
	return 0
}

// Task returns a task as the run last showed it.
func (t *Tracker) Task(id string) (planner.Task, bool) {
	task, ok := t.tasks[id]
	return task, ok
}

// Tasks returns the tasks in the order the run showed them.
func (t *Tracker) Tasks() []planner.Task {
	out := make([]planner.Task, 0, len(t.order))
	for _, id := range t.order {
		out = append(out, t.tasks[id])
	}
	return out
}

// Slot is a worker slot and the task it runs.
type Slot struct {
	Worker  int
	TaskID  string // "" when idle
	Attempt int
	Since   time.Time
}

// Slots returns the worker slots in order.
func (t *Tracker) Slots() []Slot {
	out := make([]Slot, len(t.slots))
	for i, id := range t.slots {
		out[i] = Slot{Worker: i + 1, TaskID: id}
		if id != "" {
			out[i].Attempt, out[i].Since = t.running[id], t.since[id]
		}
	}
	return out
}

// Workers returns a state's running tasks as status --json shows them:
// one per worker, in the order of the selected batch. The activity is what
// the checkpoints say: the node each attempt is in.
func Workers(res graph.Result[State]) []WorkerStatus {
	st := res.State
	out := []WorkerStatus{}
	started := map[string]time.Time{}
	for _, en := range st.Log.Items() {
		if en.TaskID != "" {
			if task, ok := st.Tasks.Get(en.TaskID); ok && task.Status == planner.StatusInProgress {
				if _, seen := started[en.TaskID]; !seen || isStartEntry(en) {
					started[en.TaskID] = en.Time
				}
			}
		}
	}
	activity := ActivityImplementing
	for _, n := range res.Next {
		switch n {
		case NodeVerify, NodeVerifyParallel:
			activity = "running tests"
		case NodeIntegrate:
			activity = "integrating"
		}
	}
	ids := []string{}
	for _, id := range st.Batch.Get() {
		if task, ok := st.Tasks.Get(id); ok && task.Status == planner.StatusInProgress {
			ids = append(ids, id)
		}
	}
	for _, task := range st.Tasks.Values() {
		if task.Status == planner.StatusInProgress && !slices.Contains(ids, task.ID) {
			ids = append(ids, task.ID)
		}
	}
	for i, id := range ids {
		w := WorkerStatus{Worker: i + 1, TaskID: id, Attempt: CurrentAttempt(st, id), Activity: activity}
		if t, ok := started[id]; ok {
			w.Since = &t
		}
		out = append(out, w)
	}
	return out
}

// ActivityImplementing is a worker's activity in status while its
// attempt's worker runs.
const ActivityImplementing = "implementing"

func isStartEntry(en Entry) bool {
	return strings.HasPrefix(en.Text, "started ")
}

// WorkerStatus is one entry of status --json's workers.
type WorkerStatus struct {
	Worker   int        `json:"worker"`
	TaskID   string     `json:"task_id"`
	Attempt  int        `json:"attempt"`
	Since    *time.Time `json:"since"`
	Activity string     `json:"activity"`
	// Host is the worker process that holds the attempt, host:pid, when
	// the run's attempts go through the queue.
	Host string `json:"host,omitempty"`
}
