package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

// CheckpointInfo describes one checkpoint of a thread.
type CheckpointInfo struct {
	Step      int64           `json:"step"`
	Source    string          `json:"source"`
	Writers   []string        `json:"writers"`
	CreatedAt time.Time       `json:"created_at"`
	Meta      json.RawMessage `json:"meta,omitempty"`
}

// History lists a thread's checkpoints, newest first. limit <= 0 lists all.
func (r *Runnable[S]) History(ctx context.Context, threadID string, limit int) ([]CheckpointInfo, error) {
	if r.saver == nil {
		return nil, ErrNoSaver
	}
	cps, err := r.saver.List(ctx, threadID, limit)
	if err != nil {
		return nil, fmt.Errorf("history of thread %s: %w", threadID, err)
	}
	out := make([]CheckpointInfo, len(cps))
	for i, cp := range cps {
		out[i] = CheckpointInfo{Step: cp.Step, Source: cp.Source, Writers: cp.Writers, CreatedAt: cp.CreatedAt, Meta: cp.Meta}
	}
	return out, nil
}

// State returns a thread's state at a checkpoint (the newest when step < 0),
// with the status, next nodes and pending interrupts as of that checkpoint.
func (r *Runnable[S]) State(ctx context.Context, threadID string, step int64) (Result[S], error) {
	if r.saver == nil {
		return Result[S]{}, ErrNoSaver
	}
	t := &thread[S]{r: r, id: threadID}
	if err := t.restoreAt(ctx, step); err != nil {
		return Result[S]{}, err
	}
	return t.result(), nil
}

// Fork starts thread newID from the state and next nodes of a checkpoint
// of threadID. newID must not exist yet.
func (r *Runnable[S]) Fork(ctx context.Context, threadID string, step int64, newID string) error {
	if r.saver == nil {
		return ErrNoSaver
	}
	s, loaded, err := r.load(ctx, threadID, step)
	if err != nil {
		return err
	}
	src := loaded.Chain[len(loaded.Chain)-1]
	t, err := r.open(ctx, newID, nil, nil)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	switch err := t.restore(ctx); {
	case err == nil:
		return fmt.Errorf("fork %s from %s: thread %s exists already", newID, threadID, newID)
	case !errors.Is(err, checkpoint.ErrNotFound):
		return fmt.Errorf("fork %s from %s: %w", newID, threadID, err)
	}
	snap, err := r.sc.encodeFull(nil, &s)
	if err != nil {
		return err
	}
	meta, _ := json.Marshal(map[string]any{"forked_from": threadID, "step": src.Step})
	cp := checkpoint.Checkpoint{Step: 0, Source: "fork", Snapshot: snap, Next: loaded.Chain[len(loaded.Chain)-1].Next, Meta: meta}
	if err := t.put(ctx, cp); err != nil {
		return fmt.Errorf("fork %s from %s at %d: %w", newID, threadID, src.Step, err)
	}
	return nil
}

// UpdateState writes update to a thread as if node asNode had written it:
// a new checkpoint holds it, and the thread goes on with asNode's
// successors (with asNode "", with the nodes that were next already). Pending results and interrupts of the old next step are
// dropped. It returns the new checkpoint's step.
func (r *Runnable[S]) UpdateState(ctx context.Context, threadID, asNode string, update S) (int64, error) {
	if r.saver == nil {
		return -1, ErrNoSaver
	}
	if asNode != "" && asNode != START && r.g.nodes[asNode] == nil {
		return -1, fmt.Errorf("update thread %s: unknown node %q", threadID, asNode)
	}
	t, err := r.open(ctx, threadID, nil, nil)
	if err != nil {
		return -1, err
	}
	defer t.close(ctx)
	if err := t.restore(ctx); err != nil {
		return -1, err
	}
	r.sc.merge(&t.state, &update)
	next := t.next
	if asNode != "" {
		if next, err = t.route(ctx, asNode, nil); err != nil {
			return -1, err
		}
	}
	cp := checkpoint.Checkpoint{Step: t.head + 1, Source: "update"}
	if asNode != "" {
		cp.Writers = []string{asNode}
	}
	if cp.Deltas, err = r.sc.encodeUpdate(nil, &update); err != nil {
		return -1, err
	}
	if cp.Next, err = encodeNext(next); err != nil {
		return -1, err
	}
	if err := t.put(ctx, cp); err != nil {
		return -1, err
	}
	return cp.Step, nil
}

// Prune keeps a thread's newest keep checkpoints and deletes the older
// ones. The kept ones stay readable: the oldest of them gets a snapshot.
func (r *Runnable[S]) Prune(ctx context.Context, threadID string, keep int) error {
	if r.saver == nil {
		return ErrNoSaver
	}
	if keep < 1 {
		return fmt.Errorf("prune thread %s: keep must be at least 1, got %d", threadID, keep)
	}
	cps, err := r.saver.List(ctx, threadID, keep)
	if err != nil {
		return fmt.Errorf("prune thread %s: %w", threadID, err)
	}
	if len(cps) < keep {
		return nil
	}
	from := cps[len(cps)-1].Step
	s, _, err := r.load(ctx, threadID, from)
	if err != nil {
		return err
	}
	snap, err := r.sc.encodeFull(nil, &s)
	if err != nil {
		return err
	}
	t, err := r.open(ctx, threadID, nil, nil)
	if err != nil {
		return err
	}
	defer t.close(ctx)
	if err := r.saver.Prune(ctx, t.lease, from, snap); err != nil {
		return fmt.Errorf("prune thread %s: %w", threadID, err)
	}
	return nil
}
