package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

// Durability says when a checkpoint is committed.
type Durability int

const (
	// DurabilitySync commits each super-step's checkpoint before the next
	// step starts. It is the default.
	DurabilitySync Durability = iota
	// DurabilityAsync writes a step's checkpoint while the next step runs;
	// at most one write is in flight, and a run waits for it before it
	// returns. A crash can lose the last step.
	DurabilityAsync
)

// CompileOpts configures a compiled graph. Nil means defaults.
type CompileOpts struct {
	// Saver stores checkpoints; nil runs without persistence, and then
	// interrupted runs cannot be resumed.
	Saver checkpoint.Saver
	// StepLimit bounds the super-steps of one call; 0 means 100.
	StepLimit int
	// Durability defaults to DurabilitySync.
	Durability Durability
	// Holder names this process in leases; "" means "pid N, host H".
	Holder string
	// LeaseTTL is how long a lease outlives its last renewal; 0 means 30s.
	LeaseTTL time.Duration
	// HolderAliveFunc reports whether the holder of a live lease still
	// runs. A holder known dead is taken over at once instead of after its
	// lease expires. nil checks holders on this host by their pid.
	HolderAliveFunc func(holder string) bool
	// Clock defaults to the real clock.
	Clock  Clock
	Logger *slog.Logger
}

// RunOpts configures one call of a compiled graph. Nil means defaults.
type RunOpts struct {
	// StepLimit overrides CompileOpts.StepLimit.
	StepLimit int
	// EventFunc receives the run's events.
	EventFunc func(Event)
}

// Status is a thread's state between calls.
type Status string

// Thread statuses.
const (
	// StatusDone: the thread reached END (no task is left to run).
	StatusDone Status = "done"
	// StatusInterrupted: interrupts wait for answers (see Resume).
	StatusInterrupted Status = "interrupted"
	// StatusPending: tasks are left to run, after an error, a crash or the
	// step limit (see Continue).
	StatusPending Status = "pending"
)

// Result is the outcome of a call.
type Result[S any] struct {
	State  S
	Status Status
	// Step is the thread's newest checkpoint (-1 without a saver).
	Step int64
	// Interrupts are the interrupts that wait for answers.
	Interrupts []Interruption
	// Answered are the interrupts of the next step that have an answer not
	// acted on yet: their task runs again once all of its interrupts have
	// one.
	Answered []Answered
	// Next are the nodes of the step that would run next.
	Next []string
}

// Answered is an interrupt and the answer recorded for it.
type Answered struct {
	Interruption
	Answer json.RawMessage `json:"answer"`
}

// NodeError is a node's failure, with the node's name.
type NodeError struct {
	Node   string
	TaskID string
	Step   int64
	Err    error
}

func (e *NodeError) Error() string { return fmt.Sprintf("node %s: %v", e.Node, e.Err) }

// Unwrap returns the node's error.
func (e *NodeError) Unwrap() error { return e.Err }

// PanicError is a node's panic turned into its error. Its message is one
// line, fit for a log or a terminal; the stack is kept apart, for a crash
// report.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// ErrNoSaver means an operation needs a checkpoint saver.
var ErrNoSaver = errors.New("graph: this operation needs a checkpoint saver")

// ErrNotPending means an answer was given for an interrupt that is not
// pending: unknown, or answered and acted on already (by another caller,
// say).
var ErrNotPending = errors.New("graph: no such pending interrupt")

// Runnable is a compiled graph. It is safe for concurrent use on different
// threads.
type Runnable[S any] struct {
	g        *Graph[S]
	sc       *schema[S]
	saver    checkpoint.Saver
	opts     CompileOpts
	clock    Clock
	log      *slog.Logger
	holder   string
	startSet bool
}

// Compile checks the graph and returns it ready to run.
func (g *Graph[S]) Compile(opts *CompileOpts) (*Runnable[S], error) {
	if err := g.validate(); err != nil {
		return nil, err
	}
	g.compiled = true
	g.link()
	r := &Runnable[S]{g: g, sc: g.schema}
	if opts != nil {
		r.opts = *opts
	}
	r.saver = r.opts.Saver
	r.clock = r.opts.Clock
	if r.clock == nil {
		r.clock = realClock{}
	}
	r.log = r.opts.Logger
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.opts.StepLimit <= 0 {
		r.opts.StepLimit = 100
	}
	if r.opts.LeaseTTL <= 0 {
		r.opts.LeaseTTL = 30 * time.Second
	}
	r.holder = r.opts.Holder
	if r.holder == "" {
		r.holder = DefaultHolder()
	}
	if r.opts.HolderAliveFunc == nil {
		r.opts.HolderAliveFunc = localHolderAlive
	}
	return r, nil
}

// DefaultHolder names this process: "pid N, host H".
func DefaultHolder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d, host %s", os.Getpid(), host)
}

// HolderAlive reports false only for a lease holder named by
// DefaultHolder on this host whose process no longer exists: its lease,
// not lapsed yet, holds nothing.
func HolderAlive(holder string) bool { return localHolderAlive(holder) }

// localHolderAlive reports false only for a holder named by DefaultHolder
// on this host whose process no longer exists.
func localHolderAlive(holder string) bool {
	pidPart, hostPart, ok := strings.Cut(holder, ", host ")
	if !ok || !strings.HasPrefix(pidPart, "pid ") {
		return true
	}
	host, _ := os.Hostname()
	if hostPart != host {
		return true
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(pidPart, "pid "))
	if err != nil || pid <= 0 {
		return true
	}
	if pid == os.Getpid() {
		return true
	}
	return processExists(pid)
}

// taskSpec is one task of a super-step, as stored in a checkpoint's Next.
type taskSpec struct {
	Node  string          `json:"n"`
	Input json.RawMessage `json:"i,omitempty"`
	live  any
	send  bool
	node  any // the *node[S] named Node when known; a restored task has none
}

// nodeOf returns the node a task runs, nil if the graph has none by its
// name.
func (t *thread[S]) nodeOf(ts *taskSpec) *node[S] {
	if n, ok := ts.node.(*node[S]); ok {
		return n
	}
	return t.r.g.nodes[ts.Node]
}

func taskID(node string, idx int) string { return node + "#" + strconv.Itoa(idx) }

// thread is the state of one call on one thread.
type thread[S any] struct {
	r      *Runnable[S]
	id     string
	lease  checkpoint.Lease
	state  S
	head   int64
	next   []taskSpec
	events func(Event)
	evMu   sync.Mutex

	// Results of the pending step (head+1) already recorded, by task index.
	doneUpdates map[int][]byte
	interrupts  map[int][]Interruption
	resume      map[string]json.RawMessage

	sinceSnapshot int
	snapshotSize  int

	// Buffers the steps reuse: the results of a step, two for the tasks
	// of a step (one holds next, nextIn says which, -1 for neither: next
	// is then the graph's own list, not to be written, or one decoded),
	// and the scratch and context of a lone task.
	results  []taskResult[S]
	nextBufs [2][]taskSpec
	nextIn   int
	loneSc   *scratch
	loneCtx  context.Context

	pending   chan error // async durability: the write in flight
	stopRenew func()
	// lost is set when the renewal found the lease lost: there is nothing
	// left to release.
	lost atomic.Bool
}

func (t *thread[S]) emit(e Event) {
	if t.events == nil {
		return
	}
	e.ThreadID = t.id
	if e.Time.IsZero() {
		e.Time = t.r.clock.Now()
	}
	if e.Err != nil {
		e.Error = e.Err.Error()
	}
	t.evMu.Lock()
	defer t.evMu.Unlock()
	t.events(e)
}

// open acquires the thread's lease and renews it until close. When the
// lease is lost while the thread runs, lost (if not nil) is called with a
// *LeaseLostError: it cancels the run's context.
func (r *Runnable[S]) open(ctx context.Context, id string, opts *RunOpts, lost context.CancelCauseFunc) (*thread[S], error) {
	t := &thread[S]{r: r, id: id, head: -1, nextIn: -1}
	if opts != nil {
		t.events = opts.EventFunc
	}
	if r.saver == nil {
		return t, nil
	}
	lease, err := r.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	t.lease = lease
	t.startRenewal(lost)
	return t, nil
}

// leaseNow is the time leases are taken and renewed at: the zero time,
// which tells the saver to use the store's clock, unless a clock was
// injected (tests that move time by hand).
func (r *Runnable[S]) leaseNow() time.Time {
	if r.opts.Clock == nil {
		return time.Time{}
	}
	return r.clock.Now()
}

func (r *Runnable[S]) acquire(ctx context.Context, id string) (checkpoint.Lease, error) {
	now := r.leaseNow()
	lease, err := r.saver.Acquire(ctx, id, r.holder, now, r.opts.LeaseTTL)
	var busy *checkpoint.BusyError
	if errors.As(err, &busy) && !r.opts.HolderAliveFunc(busy.Holder) {
		r.log.WarnContext(ctx, "taking over the lease of a dead holder", slog.String("thread_id", id), slog.String("holder", busy.Holder))
		// The holder is gone: its lease counts as expired now.
		lease, err = r.saver.Acquire(ctx, id, r.holder, busy.Expires.Add(time.Nanosecond), r.opts.LeaseTTL)
		if err == nil {
			// Renewing our own live lease keeps its token and sets its
			// expiry from now, on the clock the other leases use.
			lease, err = r.saver.Acquire(ctx, id, r.holder, now, r.opts.LeaseTTL)
		}
	}
	if err != nil {
		return checkpoint.Lease{}, fmt.Errorf("acquire thread %s: %w", id, err)
	}
	return lease, nil
}

// LeaseLostError reports that a thread's lease was lost while a call drove
// the thread: another holder took it over, or it lapsed because it could
// not be renewed in time. The call stops; errors.Is(err,
// checkpoint.ErrLeaseLost) holds.
type LeaseLostError struct {
	ThreadID string
	// Holder is the process that holds the lease now, when known.
	Holder string
	// Err is the last renewal error when the lease lapsed.
	Err error
}

func (e *LeaseLostError) Error() string {
	if e.Holder != "" {
		return fmt.Sprintf("thread %s: lease lost: another process (%s) took the thread over", e.ThreadID, e.Holder)
	}
	if errors.Is(e.Err, checkpoint.ErrLeaseLost) {
		return fmt.Sprintf("thread %s: lease lost: it lapsed or was released", e.ThreadID)
	}
	if e.Err != nil {
		return fmt.Sprintf("thread %s: lease lost: it lapsed before it could be renewed: %v", e.ThreadID, e.Err)
	}
	return fmt.Sprintf("thread %s: lease lost: it lapsed before it was renewed", e.ThreadID)
}

// Is reports checkpoint.ErrLeaseLost.
func (e *LeaseLostError) Is(target error) bool { return target == checkpoint.ErrLeaseLost }

// Unwrap returns the last renewal error.
func (e *LeaseLostError) Unwrap() error { return e.Err }

// startRenewal renews the lease in the background, so that a node that runs
// for long does not lose it. A renewal that fails is tried again until the
// lease would have lapsed (a store restarting is no reason to stop); when
// the lease is lost, lost cancels the run.
func (t *thread[S]) startRenewal(lost context.CancelCauseFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.stopRenew = func() { cancel(); <-done }
	r, ttl := t.r, t.r.opts.LeaseTTL
	giveUp := func(e *LeaseLostError) {
		t.lost.Store(true)
		r.log.ErrorContext(ctx, "lease lost", slog.String("thread_id", t.id), slog.String("error", e.Error()))
		if lost != nil {
			lost(e)
		}
	}
	go func() {
		defer close(done)
		// renewed is when the store last confirmed the lease, on the
		// runtime's clock: the lease lasts until renewed+ttl at least.
		renewed := r.clock.Now()
		wait := ttl / 3
		// failed is the last renewal's error since the last success: the
		// reason, when the lease lapses, is the store's silence.
		var failed error
		for {
			if err := sleep(ctx, r.clock, wait); err != nil {
				return
			}
			left := renewed.Add(ttl).Sub(r.clock.Now())
			if left <= 0 {
				if failed == nil {
					failed = errors.New("not renewed in time")
				}
				giveUp(&LeaseLostError{ThreadID: t.id, Err: failed})
				return
			}
			// A saver that retries on its own must not wait past the lapse.
			actx, acancel := context.WithTimeout(ctx, left)
			lease, err := r.saver.Acquire(actx, t.id, r.holder, r.leaseNow(), ttl)
			acancel()
			if ctx.Err() != nil {
				return
			}
			var busy *checkpoint.BusyError
			switch {
			case errors.As(err, &busy):
				giveUp(&LeaseLostError{ThreadID: t.id, Holder: busy.Holder})
				return
			case err == nil && lease.Token != t.lease.Token:
				// The lease lapsed and this renewal took it anew: writes
				// with the old token fail, and another process may have
				// held it in between.
				_ = r.saver.Release(context.WithoutCancel(ctx), lease)
				giveUp(&LeaseLostError{ThreadID: t.id})
				return
			case err == nil:
				renewed, wait, failed = r.clock.Now(), ttl/3, nil
			default:
				failed = err
				r.log.WarnContext(ctx, "lease renewal failed; retrying", slog.String("thread_id", t.id), slog.Any("error", err))
				if !r.clock.Now().Before(renewed.Add(ttl)) {
					giveUp(&LeaseLostError{ThreadID: t.id, Err: err})
					return
				}
				wait = max(ttl/20, time.Millisecond)
			}
		}
	}()
}

// leaseLost turns the error of a call that lost its lease into a
// *LeaseLostError: the one that cancelled ctx, or, when a write found the
// lease gone first, one naming the lease's holder now.
func (r *Runnable[S]) leaseLost(ctx context.Context, threadID string, err error) error {
	if err == nil {
		return nil
	}
	var lle *LeaseLostError
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &lle) {
		return lle
	}
	if errors.As(err, &lle) || !errors.Is(err, checkpoint.ErrLeaseLost) || r.saver == nil {
		return err
	}
	lle = &LeaseLostError{ThreadID: threadID, Err: err}
	if threads, terr := r.saver.Threads(context.WithoutCancel(ctx)); terr == nil {
		for _, info := range threads {
			if info.ThreadID == threadID && info.Holder != r.holder {
				lle.Holder = info.Holder
			}
		}
	}
	return lle
}

func (t *thread[S]) close(ctx context.Context) error {
	err := t.flush()
	if t.stopRenew != nil {
		t.stopRenew()
	}
	if t.r.saver != nil && t.lease.Token != 0 && !t.lost.Load() {
		if rerr := t.r.saver.Release(context.WithoutCancel(ctx), t.lease); err == nil && rerr != nil {
			err = fmt.Errorf("release thread %s: %w", t.id, rerr)
		}
	}
	return err
}

// flush waits for the write in flight.
func (t *thread[S]) flush() error {
	if t.pending == nil {
		return nil
	}
	err := <-t.pending
	t.pending = nil
	return err
}

// load rebuilds the thread's state at step (the head when step < 0).
func (r *Runnable[S]) load(ctx context.Context, id string, step int64) (S, checkpoint.Loaded, error) {
	var zero S
	loaded, err := r.saver.Load(ctx, id, step)
	if err != nil {
		return zero, loaded, fmt.Errorf("load thread %s: %w", id, err)
	}
	first := loaded.Chain[0]
	if first.Snapshot == nil {
		return zero, loaded, &checkpoint.DecodeError{ThreadID: id, Step: first.Step, Err: errors.New("no snapshot to start from")}
	}
	s, err := r.sc.decodeFull(first.Snapshot)
	if err != nil {
		return zero, loaded, &checkpoint.DecodeError{ThreadID: id, Step: first.Step, Err: err}
	}
	for _, cp := range loaded.Chain[1:] {
		if err := r.applyDeltas(&s, cp.Deltas); err != nil {
			return zero, loaded, &checkpoint.DecodeError{ThreadID: id, Step: cp.Step, Err: err}
		}
	}
	return s, loaded, nil
}

// applyDeltas folds a checkpoint's Deltas: one update object, or an array
// of them in merge order.
func (r *Runnable[S]) applyDeltas(s *S, deltas []byte) error {
	deltas = bytes.TrimSpace(deltas)
	if len(deltas) == 0 {
		return nil
	}
	if deltas[0] != '[' {
		return r.sc.applyUpdate(s, deltas)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(deltas, &parts); err != nil {
		return fmt.Errorf("decode deltas: %w", err)
	}
	for _, p := range parts {
		if err := r.sc.applyUpdate(s, p); err != nil {
			return err
		}
	}
	return nil
}

// restore loads the head of an existing thread into t, with the pending
// writes of its next step.
func (t *thread[S]) restore(ctx context.Context) error { return t.restoreAt(ctx, -1) }

// restoreAt loads a thread as of checkpoint step (the head when step < 0).
// Only the head has pending writes: an earlier step's were settled by the
// step after it.
func (t *thread[S]) restoreAt(ctx context.Context, step int64) error {
	s, loaded, err := t.r.load(ctx, t.id, step)
	if err != nil {
		return err
	}
	t.state = s
	head := loaded.Chain[len(loaded.Chain)-1]
	t.head = head.Step
	t.snapshotSize = len(loaded.Chain[0].Snapshot)
	for _, cp := range loaded.Chain[1:] {
		t.sinceSnapshot += len(cp.Deltas)
	}
	t.next = nil
	if len(head.Next) > 0 {
		if err := json.Unmarshal(head.Next, &t.next); err != nil {
			return &checkpoint.DecodeError{ThreadID: t.id, Step: head.Step, Err: fmt.Errorf("next tasks: %w", err)}
		}
		for _, ts := range t.next {
			if _, ok := t.r.g.nodes[ts.Node]; !ok {
				// Damage that still decodes, or a graph that lost a node.
				return &checkpoint.DecodeError{ThreadID: t.id, Step: head.Step, Err: fmt.Errorf("next tasks: the graph has no node %q", ts.Node)}
			}
		}
	}
	t.doneUpdates = map[int][]byte{}
	t.interrupts = map[int][]Interruption{}
	t.resume = map[string]json.RawMessage{}
	// The pending writes are checked now, before any task runs again: a
	// damaged one is damage to the step they belong to, reported as such
	// (with the checkpoint to go on from), not found after the step's other
	// tasks have been paid for again.
	damaged := func(w checkpoint.Write, err error) error {
		return &checkpoint.DecodeError{ThreadID: t.id, Step: head.Step + 1, Err: fmt.Errorf("pending %s of task %s: %w", w.Kind, w.TaskID, err)}
	}
	for _, w := range loaded.Writes {
		switch w.Kind {
		case checkpoint.WriteResume:
			if !json.Valid(w.Payload) {
				return damaged(w, errors.New("not JSON"))
			}
			t.resume[w.TaskID] = w.Payload
		case checkpoint.WriteUpdate, checkpoint.WriteInterrupt:
			idx := t.taskIndex(w.TaskID)
			if idx < 0 {
				return damaged(w, errors.New("no such task in the step"))
			}
			if w.Kind == checkpoint.WriteUpdate {
				var probe S
				if err := t.r.applyDeltas(&probe, w.Payload); err != nil {
					return damaged(w, err)
				}
				t.doneUpdates[idx] = w.Payload
				continue
			}
			var ints []Interruption
			if err := json.Unmarshal(w.Payload, &ints); err != nil {
				return damaged(w, err)
			}
			t.interrupts[idx] = ints
		}
	}
	return nil
}

func (t *thread[S]) taskIndex(id string) int {
	for i, ts := range t.next {
		if taskID(ts.Node, i) == id {
			return i
		}
	}
	return -1
}

// interruptsOf returns the next step's recorded interrupts that wait for
// an answer, and those that have one.
func (t *thread[S]) interruptsOf() (pending []Interruption, answered []Answered) {
	for i := range t.next {
		for _, in := range t.interrupts[i] {
			if a, ok := t.resume[in.ID]; ok {
				answered = append(answered, Answered{Interruption: in, Answer: a})
			} else {
				pending = append(pending, in)
			}
		}
	}
	return pending, answered
}

func (t *thread[S]) result() Result[S] {
	res := Result[S]{State: t.state, Step: t.head}
	res.Interrupts, res.Answered = t.interruptsOf()
	for _, ts := range t.next {
		res.Next = append(res.Next, ts.Node)
	}
	switch {
	case len(t.next) == 0:
		res.Status = StatusDone
	case len(res.Interrupts) > 0:
		res.Status = StatusInterrupted
	default:
		res.Status = StatusPending
	}
	return res
}

// Invoke starts a run of the graph on a thread with input merged into the
// thread's state (an empty state for a new thread), from START. It returns
// when the run reaches END, is interrupted, or fails.
func (r *Runnable[S]) Invoke(ctx context.Context, threadID string, input S, opts *RunOpts) (Result[S], error) {
	return r.drive(ctx, threadID, opts, func(ctx context.Context, t *thread[S]) (Result[S], error) {
		return t.invoke(ctx, input, opts)
	})
}

// drive opens a thread, runs body on it and closes it. The thread is
// closed (its lease released, its renewal stopped) even when body panics,
// so that a caller that recovers does not keep the thread locked.
func (r *Runnable[S]) drive(ctx context.Context, threadID string, opts *RunOpts, body func(context.Context, *thread[S]) (Result[S], error)) (res Result[S], err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t, err := r.open(ctx, threadID, opts, cancel)
	if err != nil {
		return Result[S]{}, err
	}
	defer func() {
		if cerr := t.close(ctx); err == nil && cerr != nil {
			err = cerr
		}
		err = r.leaseLost(ctx, threadID, err)
	}()
	return body(ctx, t)
}

func (t *thread[S]) invoke(ctx context.Context, input S, opts *RunOpts) (Result[S], error) {
	r := t.r
	if r.saver != nil {
		if err := t.restore(ctx); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
			return Result[S]{}, err
		}
	}
	r.sc.merge(&t.state, &input)
	next, err := t.route(ctx, START, nil)
	if err != nil {
		return t.result(), err
	}
	t.next = next
	t.doneUpdates, t.interrupts, t.resume = nil, nil, nil
	if r.saver != nil {
		cp := checkpoint.Checkpoint{Step: t.head + 1, Source: "input", Writers: []string{START}}
		if t.head < 0 {
			cp.Snapshot, err = r.sc.encodeFull(nil, &t.state)
			t.snapshotSize, t.sinceSnapshot = len(cp.Snapshot), 0
		} else {
			cp.Deltas, err = r.sc.encodeUpdate(nil, &input)
		}
		if err != nil {
			return t.result(), err
		}
		// A run stopped in its first step goes on from here.
		if cp.Next, err = encodeNext(next); err != nil {
			return t.result(), err
		}
		if err := t.put(ctx, cp); err != nil {
			return t.result(), err
		}
	}
	t.head++
	return t.loop(ctx, opts)
}

// Continue runs a thread on from its newest checkpoint: after a crash, an
// error or the step limit. Results that tasks of the pending step already
// recorded are used, and only the other tasks run.
func (r *Runnable[S]) Continue(ctx context.Context, threadID string, opts *RunOpts) (Result[S], error) {
	return r.Resume(ctx, threadID, nil, opts)
}

// Resume delivers values to pending interrupts, keyed by interrupt ID, and
// runs the thread on. A task runs again only when all its interrupts are
// answered; if some stay unanswered, the run ends interrupted again.
func (r *Runnable[S]) Resume(ctx context.Context, threadID string, values map[string]any, opts *RunOpts) (Result[S], error) {
	if r.saver == nil {
		return Result[S]{}, ErrNoSaver
	}
	return r.drive(ctx, threadID, opts, func(ctx context.Context, t *thread[S]) (Result[S], error) {
		return t.resumeWith(ctx, values, opts)
	})
}

func (t *thread[S]) resumeWith(ctx context.Context, values map[string]any, opts *RunOpts) (Result[S], error) {
	if err := t.answer(ctx, values); err != nil {
		return t.result(), err
	}
	return t.loop(ctx, opts)
}

// Answer records values for pending interrupts, keyed by interrupt ID,
// without running the thread; Continue or Resume acts on them later.
func (r *Runnable[S]) Answer(ctx context.Context, threadID string, values map[string]any) error {
	if r.saver == nil {
		return ErrNoSaver
	}
	_, err := r.drive(ctx, threadID, nil, func(ctx context.Context, t *thread[S]) (Result[S], error) {
		return Result[S]{}, t.answer(ctx, values)
	})
	return err
}

// answer restores the thread and records values for its pending
// interrupts.
func (t *thread[S]) answer(ctx context.Context, values map[string]any) error {
	if err := t.restore(ctx); err != nil {
		return err
	}
	if len(values) == 0 {
		return nil
	}
	pending, _ := t.interruptsOf()
	var writes []checkpoint.Write
	for _, id := range sortedKeys(values) {
		if !slices.ContainsFunc(pending, func(in Interruption) bool { return in.ID == id }) {
			if len(pending) == 0 {
				return fmt.Errorf("resume thread %s: no interrupt is pending, so %q cannot be answered: %w", t.id, id, ErrNotPending)
			}
			ids := make([]string, len(pending))
			for i, in := range pending {
				ids[i] = in.ID
			}
			return fmt.Errorf("resume thread %s: no pending interrupt %q (pending: %s): %w", t.id, id, strings.Join(ids, ", "), ErrNotPending)
		}
		data, err := json.Marshal(values[id])
		if err != nil {
			return fmt.Errorf("resume thread %s: encode value for %s: %w", t.id, id, err)
		}
		writes = append(writes, checkpoint.Write{Step: t.head + 1, TaskID: id, Kind: checkpoint.WriteResume, Payload: data})
		t.resume[id] = data
	}
	if err := t.r.saver.PutWrites(ctx, t.lease, writes); err != nil {
		return fmt.Errorf("resume thread %s: %w", t.id, err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// route computes the tasks that follow a node, from its static edges and
// its router, on the current state.
// The tasks are appended to out.
func (t *thread[S]) route(ctx context.Context, from string, out []taskSpec) ([]taskSpec, error) {
	return t.routeFrom(ctx, t.r.g.hop(from), out)
}

// routeFrom is route from a node (nil: one the graph does not have, which
// nothing follows).
func (t *thread[S]) routeFrom(ctx context.Context, n *node[S], out []taskSpec) ([]taskSpec, error) {
	if n == nil {
		return out, nil
	}
	if len(n.next) > 0 {
		out = append(out, n.next...)
	}
	rt := n.router
	switch {
	case rt == nil:
		return out, nil
	case rt.route != nil:
		i, err := t.callRouter(ctx, n)
		if err != nil {
			return nil, err
		}
		if rt.targets[i] != END {
			out = append(out, rt.specs[i])
		}
		return out, nil
	}
	return t.callFanOut(ctx, n, out)
}

// routeLone routes from n, the lone task of a step, on the merged state.
// Where what follows is a task list the graph holds (n's static edges, or
// the target its router chose), it returns that list itself, for reading
// only, and buf -1; else it builds the list in spare buffer buf.
func (t *thread[S]) routeLone(ctx context.Context, n *node[S]) (next []taskSpec, buf int, err error) {
	rt := n.router
	switch {
	case rt == nil:
		// AddEdge refuses an edge twice: nothing to merge.
		return n.next, -1, nil
	case rt.route != nil && len(n.next) == 0:
		i, err := t.callRouter(ctx, n)
		if err != nil || rt.targets[i] == END {
			return nil, -1, err
		}
		return rt.specs[i : i+1 : i+1], -1, nil
	}
	buf, out := t.spare()
	if next, err = t.routeFrom(ctx, n, out); err == nil && len(next) > 1 {
		next = dedupe(next, 0)
	}
	return next, buf, err
}

// callRouter runs n's router and returns the index of the target it chose.
func (t *thread[S]) callRouter(ctx context.Context, n *node[S]) (_ int, err error) {
	defer t.recoverRouter(n.name, &err)
	rt := n.router
	to, err := rt.route(ctx, t.state)
	if err != nil {
		return 0, &NodeError{Node: n.name, Step: t.head + 1, Err: fmt.Errorf("router: %w", err)}
	}
	i := slices.Index(rt.targets, to)
	if i < 0 {
		return 0, &NodeError{Node: n.name, Step: t.head + 1, Err: fmt.Errorf("router returned %q, which is not among its targets %v", to, rt.targets)}
	}
	return i, nil
}

// callFanOut runs n's fan-out and appends the tasks it sends to out.
func (t *thread[S]) callFanOut(ctx context.Context, n *node[S], out []taskSpec) (_ []taskSpec, err error) {
	defer t.recoverRouter(n.name, &err)
	rt := n.router
	from := n.name
	sends, err := rt.fanOut(ctx, t.state)
	if err != nil {
		return nil, &NodeError{Node: from, Step: t.head + 1, Err: fmt.Errorf("fan-out: %w", err)}
	}
	for _, s := range sends {
		i := slices.Index(rt.targets, s.Node)
		if i < 0 {
			return nil, &NodeError{Node: from, Step: t.head + 1, Err: fmt.Errorf("fan-out sent to %q, which is not among its targets %v", s.Node, rt.targets)}
		}
		if s.Node == END {
			continue
		}
		ts := taskSpec{Node: s.Node, send: true, live: s.Input, node: rt.specs[i].node}
		if s.Input != nil {
			if t.r.saver != nil {
				if ts.Input, err = json.Marshal(s.Input); err != nil {
					return nil, &NodeError{Node: from, Step: t.head + 1, Err: fmt.Errorf("encode input for %q: %w", s.Node, err)}
				}
			}
		}
		out = append(out, ts)
	}
	return out, nil
}

// recoverRouter, deferred, turns a panic of the router or fan-out of node
// from into its error: a router is the user's code, as a node is, so its
// panic is the step's error, not the caller's, and the thread is let go
// as after any error.
func (t *thread[S]) recoverRouter(from string, err *error) {
	if p := recover(); p != nil {
		*err = &NodeError{Node: from, Step: t.head + 1, Err: fmt.Errorf("router: %w", &PanicError{Value: p, Stack: debug.Stack()})}
	}
}

// taskResult is the outcome of one task of a super-step.
type taskResult[S any] struct {
	update     S
	encoded    []byte // the encoded update, when recorded or restored
	live       bool
	interrupts []Interruption
	err        error
	ran        bool
}

func (t *thread[S]) loop(ctx context.Context, opts *RunOpts) (Result[S], error) {
	limit := t.r.opts.StepLimit
	if opts != nil && opts.StepLimit > 0 {
		limit = opts.StepLimit
	}
	// Every step runs with ctx: the context of a task that runs alone in
	// its step is made once here, not once a step.
	t.loneSc = new(scratch)
	t.loneCtx = context.WithValue(ctx, scratchKey{}, t.loneSc)
	for steps := 0; ; steps++ {
		if len(t.next) == 0 {
			if err := t.flush(); err != nil {
				return t.result(), err
			}
			return t.result(), nil
		}
		if steps >= limit {
			if err := t.flush(); err != nil {
				return t.result(), err
			}
			return t.result(), fmt.Errorf("thread %s after %d steps: %w", t.id, steps, ErrStepLimit)
		}
		if err := ctx.Err(); err != nil {
			if ferr := t.flush(); ferr != nil {
				return t.result(), ferr
			}
			return t.result(), err
		}
		stop, err := t.step(ctx)
		if err != nil || stop {
			if ferr := t.flush(); err == nil && ferr != nil {
				err = ferr
			}
			return t.result(), err
		}
	}
}

// step runs one super-step. stop reports an interrupt.
func (t *thread[S]) step(ctx context.Context) (stop bool, err error) {
	if len(t.next) == 1 && t.events == nil && t.r.saver == nil && t.doneUpdates == nil && t.interrupts == nil {
		return t.stepLone(ctx)
	}
	r := t.r
	step := t.head + 1
	var start time.Time
	if t.events != nil {
		start = r.clock.Now()
		t.emit(Event{Kind: EventStepStart, Step: step, Time: start})
	}
	results := t.stepResults(len(t.next))
	var toRunBuf [4]int
	toRun := toRunBuf[:0]
	fresh := t.doneUpdates == nil && t.interrupts == nil // nothing of this step was recorded
	for i := range t.next {
		if fresh {
			toRun = append(toRun, i)
			continue
		}
		if enc, ok := t.doneUpdates[i]; ok {
			results[i] = taskResult[S]{encoded: enc}
			continue
		}
		if ints, ok := t.interrupts[i]; ok {
			answered := true
			for _, in := range ints {
				if _, ok := t.resume[in.ID]; !ok {
					answered = false
				}
			}
			if !answered {
				results[i] = taskResult[S]{interrupts: ints}
				continue
			}
		}
		toRun = append(toRun, i)
	}
	// Record each task's result as it finishes when the step has several
	// tasks or may stop: then a failing sibling or a crash loses nothing.
	record := r.saver != nil && len(t.next) > 1
	if len(toRun) == 1 {
		t.runTask(ctx, step, toRun[0], &results[toRun[0]], record, true)
	} else {
		var wg sync.WaitGroup
		for _, i := range toRun {
			wg.Go(func() { t.runTask(ctx, step, i, &results[i], record, false) })
		}
		wg.Wait()
	}
	if stop, err := t.stopAt(ctx, step, results, record); stop {
		return true, err
	}
	// Merge in task order, then route in task order.
	for i := range results {
		res := &results[i]
		if res.live {
			r.sc.merge(&t.state, &res.update)
		} else if err := r.applyDeltas(&t.state, res.encoded); err != nil {
			return true, &checkpoint.DecodeError{ThreadID: t.id, Step: step, Err: fmt.Errorf("pending result of task %s: %w", t.next[i].Node, err)}
		}
	}
	next, buf, err := t.routeNext(ctx, step)
	if err != nil {
		return true, err
	}
	if r.saver != nil {
		writers := make([]string, len(t.next))
		for i, ts := range t.next {
			writers[i] = ts.Node
		}
		cp := checkpoint.Checkpoint{Step: step, Source: "loop", Writers: writers, CreatedAt: r.clock.Now()}
		if cp.Deltas, err = t.encodeDeltas(results); err != nil {
			return true, err
		}
		if cp.Next, err = encodeNext(next); err != nil {
			return true, err
		}
		t.sinceSnapshot += len(cp.Deltas)
		if t.sinceSnapshot >= t.snapshotSize {
			if cp.Snapshot, err = r.sc.encodeFull(nil, &t.state); err != nil {
				return true, err
			}
			t.snapshotSize, t.sinceSnapshot = len(cp.Snapshot), 0
		}
		if err := t.put(ctx, cp); err != nil {
			return true, err
		}
	}
	t.advance(step, next, buf)
	if t.events != nil {
		t.emit(Event{Kind: EventStepEnd, Step: step, Duration: r.clock.Now().Sub(start)})
	}
	return false, nil
}

// stepLone is step for the shape most steps of a loop have: one task, of
// which nothing was recorded, run without a saver or events. The outcome
// is step's; only the path of a task that succeeds is its own, in a
// function small enough for the compiler to keep its values in
// registers, which saves a fair part of the runtime's cost per step.
func (t *thread[S]) stepLone(ctx context.Context) (bool, error) {
	step := t.head + 1
	results := t.stepResults(1)
	res := &results[0]
	ts := &t.next[0]
	n := t.nodeOf(ts)
	if n != nil && n.opts.Retry == nil && ts.live == nil && ts.Input == nil {
		// runTask's one attempt, for a task without input or retries.
		sc := t.loneScratch(step, ts.Node, n.id0)
		err := callNode(t.loneCtx, n, &t.state, nil, &res.update)
		res.ran = true
		switch {
		case len(sc.raised) > 0:
			res.interrupts = sc.raised
		case err != nil:
			res.err = &NodeError{Node: ts.Node, TaskID: n.id0, Step: step, Err: err}
		default:
			res.live = true
		}
	} else {
		t.runTask(ctx, step, 0, res, false, true)
	}
	if res.err != nil || len(res.interrupts) > 0 {
		if stop, err := t.stopAt(ctx, step, results, false); stop {
			return true, err
		}
	}
	if res.live {
		t.r.sc.merge(&t.state, &res.update)
	}
	next, buf, err := t.routeLone(ctx, n)
	if err != nil {
		return true, err
	}
	t.advance(step, next, buf)
	return false, nil
}

// stopAt reports whether the step's results stop the run, and why: the
// errors first, then the interrupts; the recorded results stay pending.
// record says that each task recorded its result as it finished.
func (t *thread[S]) stopAt(ctx context.Context, step int64, results []taskResult[S], record bool) (bool, error) {
	var errs []error
	var interrupted []Interruption
	for i := range results {
		res := &results[i]
		if res.err != nil {
			errs = append(errs, res.err)
			continue
		}
		for _, in := range res.interrupts {
			// A question answered already, beside one still open, is
			// not asked again.
			if _, answered := t.resume[in.ID]; !answered {
				interrupted = append(interrupted, in)
			}
		}
	}
	if t.r.saver != nil && !record {
		// A lone task that interrupted: record its interrupts.
		for i := range results {
			if results[i].ran && len(results[i].interrupts) > 0 {
				if err := t.recordInterrupts(ctx, step, i, results[i].interrupts); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if len(errs) > 0 {
		err := errors.Join(errs...)
		ev := Event{Kind: EventError, Step: step, Err: err}
		var ne *NodeError
		if len(errs) == 1 && errors.As(errs[0], &ne) {
			ev.Node, ev.TaskID = ne.Node, ne.TaskID
		}
		t.emit(ev)
		return true, err
	}
	if len(interrupted) == 0 {
		return false, nil
	}
	t.interrupts = map[int][]Interruption{}
	t.doneUpdates = map[int][]byte{}
	for i := range results {
		if len(results[i].interrupts) > 0 {
			t.interrupts[i] = results[i].interrupts
		} else if results[i].encoded != nil {
			t.doneUpdates[i] = results[i].encoded
		}
	}
	t.emit(Event{Kind: EventInterrupt, Step: step, Interrupts: interrupted})
	return true, nil
}

// routeNext returns the tasks of the step after step, routed from its
// tasks in task order on the merged state.
func (t *thread[S]) routeNext(ctx context.Context, step int64) (_ []taskSpec, buf int, err error) {
	// next is built in a spare buffer: t.next stays readable meanwhile.
	buf, next := t.spare()
	for i := range t.next {
		ts := &t.next[i]
		n := len(next)
		if next, err = t.routeFrom(ctx, t.nodeOf(ts), next); err != nil {
			t.emit(Event{Kind: EventError, Step: step, Node: ts.Node, Err: err})
			return nil, -1, err
		}
		if n == 0 && len(next) <= 1 {
			continue // the only task so far: nothing to merge it with
		}
		next = dedupe(next, n)
	}
	return next, buf, nil
}

// dedupe drops from next[from:] each edge task whose node an edge task
// before it already runs: a node reached by several edges runs once;
// sends all run.
func dedupe(next []taskSpec, from int) []taskSpec {
	kept := next[:from]
	for _, s := range next[from:] {
		if s.send || !slices.ContainsFunc(kept, func(k taskSpec) bool { return !k.send && k.Node == s.Node }) {
			kept = append(kept, s)
		}
	}
	return kept
}

// advance makes step the thread's head and next its tasks: built in
// buffer buf, or (buf -1) a list the graph holds or one decoded.
func (t *thread[S]) advance(step int64, next []taskSpec, buf int) {
	t.head = step
	t.next, t.nextIn = next, buf
	if buf >= 0 {
		t.nextBufs[buf] = next // keeps what it grew to
	}
	t.doneUpdates, t.interrupts, t.resume = nil, nil, nil
}

// spare returns the index of the task buffer t.next does not use, and
// that buffer emptied.
func (t *thread[S]) spare() (int, []taskSpec) {
	buf := 0
	if t.nextIn == 0 {
		buf = 1
	}
	return buf, t.nextBufs[buf][:0]
}

// stepResults returns a results slice of length n, reusing the thread's
// buffer. Its updates are left as the last step wrote them: a task that
// runs writes its update whole, and a result restored or left interrupted
// is assigned whole, so only the rest is reset. A state can be large, and
// clearing it every step costs a write barrier for each of its pointers
// while the collector runs.
func (t *thread[S]) stepResults(n int) []taskResult[S] {
	if cap(t.results) < n {
		t.results = make([]taskResult[S], n)
	}
	t.results = t.results[:n]
	for i := range t.results {
		res := &t.results[i]
		if res.encoded != nil || res.interrupts != nil || res.err != nil {
			res.encoded, res.interrupts, res.err = nil, nil, nil
		}
		res.live, res.ran = false, false
	}
	return t.results
}

func (t *thread[S]) encodeDeltas(results []taskResult[S]) ([]byte, error) {
	enc := func(res *taskResult[S], buf []byte) ([]byte, error) {
		if !res.live {
			return append(buf, res.encoded...), nil
		}
		if res.encoded != nil {
			return append(buf, res.encoded...), nil
		}
		return t.r.sc.encodeUpdate(buf, &res.update)
	}
	if len(results) == 1 {
		return enc(&results[0], nil)
	}
	buf := []byte{'['}
	for i := range results {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = enc(&results[i], buf); err != nil {
			return nil, err
		}
	}
	return append(buf, ']'), nil
}

func encodeNext(next []taskSpec) ([]byte, error) {
	if len(next) == 0 {
		return nil, nil
	}
	return json.Marshal(next)
}

func (t *thread[S]) put(ctx context.Context, cp checkpoint.Checkpoint) error {
	if cp.CreatedAt.IsZero() {
		cp.CreatedAt = t.r.clock.Now()
	}
	if t.r.opts.Durability == DurabilityAsync {
		if err := t.flush(); err != nil {
			return err
		}
		ch := make(chan error, 1)
		t.pending = ch
		go func() {
			ch <- t.wrapPut(t.r.saver.Put(context.WithoutCancel(ctx), t.lease, cp), cp.Step)
		}()
		return nil
	}
	return t.wrapPut(t.r.saver.Put(ctx, t.lease, cp), cp.Step)
}

func (t *thread[S]) wrapPut(err error, step int64) error {
	if err != nil {
		return fmt.Errorf("thread %s: write checkpoint %d: %w", t.id, step, err)
	}
	return nil
}

func (t *thread[S]) recordInterrupts(ctx context.Context, step int64, idx int, ints []Interruption) error {
	data, err := json.Marshal(ints)
	if err != nil {
		return err
	}
	w := checkpoint.Write{Step: step, TaskID: taskID(t.next[idx].Node, idx), Kind: checkpoint.WriteInterrupt, Payload: data}
	if err := t.r.saver.PutWrites(ctx, t.lease, []checkpoint.Write{w}); err != nil {
		return fmt.Errorf("thread %s: record interrupts of %s: %w", t.id, w.TaskID, err)
	}
	return nil
}

// taskContext returns the context and the scratch a task runs with. A
// task that runs alone in its step reuses the thread's.
func (t *thread[S]) taskContext(ctx context.Context, lone bool, step int64, node, taskID string) (context.Context, *scratch) {
	if !lone {
		sc := &scratch{step: step, node: node, taskID: taskID, resume: t.resume}
		return context.WithValue(ctx, scratchKey{}, sc), sc
	}
	return t.loneCtx, t.loneScratch(step, node, taskID)
}

// loneScratch readies the thread's scratch for a task that runs alone in
// its step.
func (t *thread[S]) loneScratch(step int64, node, taskID string) *scratch {
	sc := t.loneSc
	sc.step, sc.node, sc.taskID = step, node, taskID
	// Pointers are written only when they change: each write costs a
	// write barrier while the collector runs, and this is every step.
	if sc.resume != nil || t.resume != nil {
		sc.resume = t.resume
	}
	if sc.raised != nil {
		sc.raised = nil
	}
	sc.next, sc.answers = 0, 0
	return sc
}

// runTask runs one task with its retry policy and fills res. lone says
// that no other task runs meanwhile.
func (t *thread[S]) runTask(ctx context.Context, step int64, idx int, res *taskResult[S], record, lone bool) {
	r := t.r
	ts := &t.next[idx]
	n := t.nodeOf(ts)
	res.ran = true
	if n == nil {
		res.err = &NodeError{Node: ts.Node, TaskID: taskID(ts.Node, idx), Step: step, Err: errors.New("unknown node")}
		return
	}
	id := n.id0
	if idx != 0 {
		id = taskID(ts.Node, idx)
	}
	var input *taskInput
	if ts.live != nil || ts.Input != nil {
		input = &taskInput{live: ts.live, raw: ts.Input}
	}
	policy := n.opts.Retry
	events := t.events != nil
	for attempt := 1; ; attempt++ {
		tctx, sc := t.taskContext(ctx, lone, step, ts.Node, id)
		var begin time.Time
		if events {
			t.emit(Event{Kind: EventNodeStart, Step: step, Node: ts.Node, TaskID: id, Attempt: attempt})
			begin = r.clock.Now()
		}
		err := callNode(tctx, n, &t.state, input, &res.update)
		var dur time.Duration
		if events {
			dur = r.clock.Now().Sub(begin)
		}
		if len(sc.raised) > 0 {
			res.interrupts = sc.raised
			t.emit(Event{Kind: EventNodeEnd, Step: step, Node: ts.Node, TaskID: id, Attempt: attempt, Duration: dur})
			if record {
				if err := t.recordInterrupts(ctx, step, idx, sc.raised); err != nil {
					res.err = err
				}
			}
			return
		}
		if err == nil {
			res.live = true
			if events {
				t.emit(Event{Kind: EventNodeEnd, Step: step, Node: ts.Node, TaskID: id, Attempt: attempt, Duration: dur})
				t.emit(Event{Kind: EventUpdate, Step: step, Node: ts.Node, TaskID: id, Update: res.update})
			}
			if record {
				enc, err := r.sc.encodeUpdate(nil, &res.update)
				if err == nil {
					res.encoded = enc
					w := checkpoint.Write{Step: step, TaskID: id, Kind: checkpoint.WriteUpdate, Payload: enc}
					err = r.saver.PutWrites(ctx, t.lease, []checkpoint.Write{w})
				}
				if err != nil {
					res.err = &NodeError{Node: ts.Node, TaskID: id, Step: step, Err: fmt.Errorf("record update: %w", err)}
				}
			}
			return
		}
		t.emit(Event{Kind: EventNodeEnd, Step: step, Node: ts.Node, TaskID: id, Attempt: attempt, Duration: dur, Err: err})
		if policy == nil || attempt >= policy.MaxAttempts || !policy.retryable(err) {
			res.err = &NodeError{Node: ts.Node, TaskID: id, Step: step, Err: err}
			return
		}
		wait := policy.backoff(attempt)
		t.emit(Event{Kind: EventRetry, Step: step, Node: ts.Node, TaskID: id, Attempt: attempt, Duration: wait, Err: err})
		if serr := sleep(ctx, r.clock, wait); serr != nil {
			res.err = &NodeError{Node: ts.Node, TaskID: id, Step: step, Err: err}
			return
		}
	}
}

// callNode runs a node on *s, sets *update to what it returns and turns a
// panic into an error. The state goes by pointer down to the node's own
// call, so that each step copies it once, not once per layer.
func callNode[S any](ctx context.Context, n *node[S], s *S, in *taskInput, update *S) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	if n.plain != nil {
		*update, err = n.plain(ctx, *s)
	} else {
		*update, err = n.run(ctx, *s, in)
	}
	return err
}
