package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// ErrInterrupt is returned by Interrupt when the run must stop to wait for
// an answer. A node returns it (wrapped or not); the runtime records the
// interrupt durably and the run ends with status interrupted.
var ErrInterrupt = errors.New("graph: interrupted")

// Interruption is a pending question from a node.
type Interruption struct {
	// ID identifies the interrupt; Resume delivers values by it.
	ID     string          `json:"id"`
	Node   string          `json:"node"`
	TaskID string          `json:"task_id"`
	Step   int64           `json:"step"`
	Value  json.RawMessage `json:"value"`
}

// Decode decodes the interrupt's payload into v.
func (i Interruption) Decode(v any) error { return json.Unmarshal(i.Value, v) }

// scratch is a task's private record of its interrupts.
type scratch struct {
	mu      sync.Mutex
	step    int64
	node    string
	taskID  string
	next    int
	resume  map[string]json.RawMessage
	raised  []Interruption
	answers int
}

type scratchKey struct{}

func (sc *scratch) interruptID(idx int) string {
	return fmt.Sprintf("%d/%s/%d", sc.step, sc.taskID, idx)
}

// Interrupt asks for a value from outside the run. The first time a node
// reaches it, Interrupt records payload and returns ErrInterrupt, which the
// node should return. When the run is resumed with a value for this
// interrupt, the node runs again from the start and this call returns the
// value instead. A node may raise several interrupts; they are numbered by
// the order of the calls, and the node runs again only when all of them
// are answered.
func Interrupt[T any](ctx context.Context, payload any) (T, error) {
	var zero T
	sc, _ := ctx.Value(scratchKey{}).(*scratch)
	if sc == nil {
		return zero, errors.New("graph: Interrupt called outside a node")
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	id := sc.interruptID(sc.next)
	sc.next++
	if raw, ok := sc.resume[id]; ok {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return zero, fmt.Errorf("decode resume value of interrupt %s: %w", id, err)
		}
		sc.answers++
		return v, nil
	}
	data, err := json.Marshal(payload)
	if err != nil {
		return zero, fmt.Errorf("encode interrupt payload: %w", err)
	}
	sc.raised = append(sc.raised, Interruption{ID: id, Node: sc.node, TaskID: sc.taskID, Step: sc.step, Value: data})
	return zero, ErrInterrupt
}
