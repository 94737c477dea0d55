package graph

import "time"

// EventKind names what an Event reports.
type EventKind string

// Event kinds.
const (
	EventStepStart EventKind = "step_start"
	EventStepEnd   EventKind = "step_end"
	EventNodeStart EventKind = "node_start"
	EventNodeEnd   EventKind = "node_end"
	EventUpdate    EventKind = "update"
	EventInterrupt EventKind = "interrupt"
	EventRetry     EventKind = "retry"
	EventError     EventKind = "error"
)

// Event is something the runtime reports while it runs a thread. Events of
// one run are delivered one at a time, never concurrently.
type Event struct {
	Kind     EventKind     `json:"kind"`
	ThreadID string        `json:"thread_id"`
	Step     int64         `json:"step"`
	Node     string        `json:"node,omitempty"`
	TaskID   string        `json:"task_id,omitempty"`
	Attempt  int           `json:"attempt,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Update is the node's update (a value of the state type) for
	// EventUpdate.
	Update     any            `json:"update,omitempty"`
	Interrupts []Interruption `json:"interrupts,omitempty"`
	Err        error          `json:"-"`
	Error      string         `json:"error,omitempty"`
	Time       time.Time      `json:"time"`
}
