package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Checkpoint is one super-step of a thread, as the runtime hands it to a
// saver. Deltas, Snapshot, Next and Meta are opaque to the saver: it stores
// and returns them byte for byte.
type Checkpoint struct {
	ThreadID string
	// Step numbers a thread's checkpoints from 0, without gaps. It doubles
	// as the checkpoint's ID within its thread.
	Step int64
	// Source says what produced the checkpoint: "input", "loop", "update"
	// or "fork".
	Source string
	// Writers are the nodes whose writes Deltas holds, in merge order.
	Writers []string
	// Deltas holds the writes of this step only.
	Deltas []byte
	// Snapshot, when not nil, is the whole state after this step; reads
	// start from the newest snapshot at or before the step they want.
	Snapshot []byte
	// Next holds the tasks of the following super-step; empty when the
	// thread has ended.
	Next []byte
	// Meta is free-form, small JSON the runtime keeps with the step.
	Meta      []byte
	CreatedAt time.Time
}

// Size is the number of payload bytes the checkpoint stores.
func (c *Checkpoint) Size() int {
	return len(c.Deltas) + len(c.Snapshot) + len(c.Next) + len(c.Meta)
}

// WriteKind tells what a pending write records.
type WriteKind string

const (
	// WriteUpdate is the update a task of the pending step returned.
	WriteUpdate WriteKind = "update"
	// WriteInterrupt records the interrupts a task raised.
	WriteInterrupt WriteKind = "interrupt"
	// WriteResume is a value delivered to one interrupt, keyed by its ID.
	WriteResume WriteKind = "resume"
)

// Write is a pending write: a result recorded for the super-step that
// follows a thread's head checkpoint (Step = head + 1) before that step's
// checkpoint is written.
type Write struct {
	ThreadID string
	Step     int64
	// TaskID names the task within the step (for example "implement#2"),
	// or for WriteResume the interrupt ID.
	TaskID  string
	Kind    WriteKind
	Payload []byte
}

// Lease is the right to write a thread, held by one process at a time.
type Lease struct {
	ThreadID string
	Holder   string
	// Token is a fencing token: it grows with every acquisition of the
	// thread, and writes carrying an older token are refused.
	Token int64
	// Expires is when the lease lapses unless renewed: on the store's
	// clock when Acquire was given the zero time.
	Expires time.Time
	// StoreClock records that the lease was taken on the store's clock
	// (Acquire was given the zero time), so that Put renews it on that
	// clock too. Savers set it; callers leave it as Acquire returned it.
	StoreClock bool
}

// Loaded is what a saver returns for a thread: the checkpoints needed to
// rebuild the state at Target, and the pending writes of the step after the
// thread's head.
type Loaded struct {
	// Chain runs from the newest checkpoint at or before the target that
	// has a snapshot (or the thread's first checkpoint) up to the target,
	// in step order.
	Chain []Checkpoint
	// Head is the thread's newest step.
	Head int64
	// Writes are the pending writes for step Head+1, in insertion order.
	// Only returned when the target is the head.
	Writes []Write
}

// ThreadInfo summarizes a thread.
type ThreadInfo struct {
	ThreadID string
	Head     int64
	// Holder holds the thread's lease, until Expires; both are zero when
	// the lease was released. A holder whose lease expired has stopped
	// without releasing it (killed, say), or lost its store.
	Holder    string
	Expires   time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Saver stores checkpoints. All implementations pass the conformance suite
// in package checkpointtest.
//
// Writes (Put, PutWrites, Prune) require a live lease from Acquire; a write
// with a lease that is no longer current fails with ErrLeaseLost.
type Saver interface {
	// Acquire takes the thread's lease for holder until now+ttl, creating
	// the thread if it does not exist. A zero now means the store's own
	// clock (the database server's): processes on machines whose clocks
	// disagree then agree on when a lease lapses. If another holder's lease is live it
	// fails with a *BusyError (errors.Is ErrThreadBusy). An expired lease is
	// taken over. Acquiring again with the same holder renews the lease.
	Acquire(ctx context.Context, threadID, holder string, now time.Time, ttl time.Duration) (Lease, error)
	// Release gives the lease up. Releasing a lost lease is not an error.
	Release(ctx context.Context, lease Lease) error
	// Put appends cp as the thread's new head. It is a compare-and-swap:
	// cp.Step must be head+1 (0 for a new thread) and the lease current,
	// or it fails with ErrConflict or ErrLeaseLost and stores nothing.
	// Put renews the lease until now+ttl of the lease's last acquisition.
	Put(ctx context.Context, lease Lease, cp Checkpoint) error
	// PutWrites records pending writes for step head+1, atomically.
	PutWrites(ctx context.Context, lease Lease, writes []Write) error
	// Load returns the chain to rebuild the state at step (or at the head
	// when step < 0). Unknown threads or steps fail with ErrNotFound.
	Load(ctx context.Context, threadID string, step int64) (Loaded, error)
	// List returns the thread's checkpoints newest first, without their
	// Deltas, Snapshot and Next. limit <= 0 means all.
	List(ctx context.Context, threadID string, limit int) ([]Checkpoint, error)
	// Threads lists threads, newest updated first.
	Threads(ctx context.Context) ([]ThreadInfo, error)
	// Prune keeps the checkpoints from step keepFrom on and deletes older
	// ones and their pending writes, in one transaction. snapshot is the
	// full state at keepFrom; it is stored on that checkpoint so that the
	// remaining checkpoints stay readable.
	Prune(ctx context.Context, lease Lease, keepFrom int64, snapshot []byte) error
	// Close releases the saver's resources.
	Close() error
}

var (
	// ErrNotFound means the thread or checkpoint does not exist.
	ErrNotFound = errors.New("checkpoint: not found")
	// ErrThreadBusy means another holder has a live lease on the thread.
	ErrThreadBusy = errors.New("checkpoint: thread is busy")
	// ErrLeaseLost means the lease used for a write is no longer current:
	// it expired and was taken over, or it was released.
	ErrLeaseLost = errors.New("checkpoint: lease lost")
	// ErrConflict means a Put's step is not the head's successor.
	ErrConflict = errors.New("checkpoint: head moved")
)

// BusyError reports the holder of a live lease.
type BusyError struct {
	ThreadID string
	Holder   string
	Expires  time.Time
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("thread %s is being driven by another process (%s)", e.ThreadID, e.Holder)
}

// Is reports ErrThreadBusy.
func (e *BusyError) Is(target error) bool { return target == ErrThreadBusy }

// ErrCorrupt means a stored checkpoint cannot be decoded.
var ErrCorrupt = errors.New("checkpoint: cannot be decoded")

// DecodeError reports a stored checkpoint that cannot be decoded: its
// bytes were damaged, or written by something else. It names the thread
// and the checkpoint, so that one damaged thread does not hide the others.
// errors.Is(err, ErrCorrupt) holds.
type DecodeError struct {
	ThreadID string
	Step     int64
	Err      error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("thread %s: checkpoint %d cannot be decoded: %v", e.ThreadID, e.Step, e.Err)
}

// Is reports ErrCorrupt.
func (e *DecodeError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the decoding error.
func (e *DecodeError) Unwrap() error { return e.Err }

// ErrStoreReplaced means a store's database file was deleted or replaced
// by another file while a saver had it open.
var ErrStoreReplaced = errors.New("checkpoint: store file replaced")

// ReplacedError names a database file that was deleted or replaced while
// open. errors.Is(err, ErrStoreReplaced) holds.
type ReplacedError struct {
	Path string
	// Deleted is set when no file is left at Path.
	Deleted bool
}

func (e *ReplacedError) Error() string {
	if e.Deleted {
		return fmt.Sprintf("store %s was deleted while the run used it", e.Path)
	}
	return fmt.Sprintf("store %s was replaced by another file while the run used it", e.Path)
}

// Is reports ErrStoreReplaced.
func (e *ReplacedError) Is(target error) bool { return target == ErrStoreReplaced }

// DedupWrites keeps the last of writes with the same step, task and kind,
// where it stands: applying the result in order leaves the same rows, in
// the same order, as applying every write one after the other. Savers
// apply it in PutWrites.
func DedupWrites(writes []Write) []Write {
	type key struct {
		step       int64
		task, kind string
	}
	last := make(map[key]int, len(writes))
	for i, w := range writes {
		last[key{w.Step, w.TaskID, string(w.Kind)}] = i
	}
	if len(last) == len(writes) {
		return writes
	}
	out := make([]Write, 0, len(last))
	for i, w := range writes {
		if last[key{w.Step, w.TaskID, string(w.Kind)}] == i {
			out = append(out, w)
		}
	}
	return out
}

// WrapStoreError leaves the contract's errors (the sentinels, *BusyError and
// a cancelled context) as they are and names the store in any other: the
// error a saver returns from a failed operation.
func WrapStoreError(store string, err error) error {
	var busy *BusyError
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrLeaseLost), errors.Is(err, ErrConflict), errors.As(err, &busy):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("%s: %w", store, err)
}
