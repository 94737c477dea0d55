package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// DefaultRetryFor is how long a saver retries a store that does not answer
// when RetryOpts.For is zero.
const DefaultRetryFor = 2 * time.Minute

const (
	retryFirstWait = 100 * time.Millisecond
	// retryMaxWait caps the backoff: a store that comes back is noticed
	// within a few seconds.
	retryMaxWait = 4 * time.Second
)

// ErrStoreUnreachable means the store did not answer for as long as the
// saver was told to retry (RetryOpts.For).
var ErrStoreUnreachable = errors.New("checkpoint: store unreachable")

// UnreachableError reports a store that kept failing with transient errors
// (a refused or reset connection, a server shutting down or starting up)
// for the whole retry period. errors.Is(err, ErrStoreUnreachable) holds.
type UnreachableError struct {
	// Store names the database, with its password masked.
	Store string
	// For is how long the saver retried.
	For time.Duration
	// Err is the last error.
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("store %s unreachable for %s: %v", e.Store, e.For.Round(time.Millisecond), e.Err)
}

// Is reports ErrStoreUnreachable.
func (e *UnreachableError) Is(target error) bool { return target == ErrStoreUnreachable }

// Unwrap returns the last error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Clock tells the time and waits; graph.Clock is this type. Tests inject a
// fake.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RetryOpts says how a saver rides out a store that stops answering for a
// while (a restart, a network blip). Nil means defaults.
type RetryOpts struct {
	// For bounds how long an operation is retried from its first transient
	// failure; 0 means DefaultRetryFor, and a negative value turns retries
	// off.
	For time.Duration
	// UnreachableFunc is told once per outage, at its first transient
	// failure, that the saver is waiting for the store. It must not block.
	UnreachableFunc func(err error, retryFor time.Duration)
	// Logger receives a warning when an outage starts and a note when it
	// ends. Nil discards them.
	Logger *slog.Logger
	// Clock defaults to the real clock.
	Clock Clock
}

// Retrier retries a saver's operations that fail with transient errors,
// with jittered exponential backoff, for up to RetryOpts.For. Savers of
// stores that can go away (a database server) run every operation through
// one; what counts as transient is theirs to say.
type Retrier struct {
	store     string // masked URL, for errors and logs
	retryFor  time.Duration
	notify    func(error, time.Duration)
	log       *slog.Logger
	clock     Clock
	transient func(error) bool

	mu sync.Mutex
	// outage is set from the first transient failure until a success, so
	// that an outage is announced once however many operations wait.
	outage bool
	// down is set when an operation gave up: until the store answers
	// again, operations try once and fail at once, so that the clean-up
	// after a give-up (releasing the lease, recording the run's status)
	// does not wait the whole period again.
	down bool
}

// NewRetrier returns a Retrier for the store named store (with its password
// masked); transient reports whether an error may go away on a new try.
func NewRetrier(store string, opts *RetryOpts, transient func(error) bool) *Retrier {
	if opts == nil {
		opts = &RetryOpts{}
	}
	r := &Retrier{store: store, retryFor: opts.For, notify: opts.UnreachableFunc, log: opts.Logger, clock: opts.Clock, transient: transient}
	if r.retryFor == 0 {
		r.retryFor = DefaultRetryFor
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.clock == nil {
		r.clock = realClock{}
	}
	return r
}

// Do runs fn until it succeeds, fails with an error that is not transient,
// ctx ends, or transient failures have lasted retryFor; then it returns an
// *UnreachableError with the last error. fn must be safe to run again after
// a failure that may have committed: idempotent, or one transaction.
func (r *Retrier) Do(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	var (
		start time.Time
		wait  = retryFirstWait
	)
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil || ctx.Err() != nil || !r.transient(err) {
			// A call cut short by its context (a deadline while the server
			// is frozen) heard nothing from the store: the outage goes on.
			heard := err == nil || !r.transient(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
			if heard {
				r.answered(ctx)
			}
			return err
		}
		now := r.clock.Now()
		if attempt == 1 {
			start = now
			r.failing(ctx, op, err)
		}
		if r.retryFor < 0 || r.isDown() || now.Sub(start) >= r.retryFor {
			r.gaveUp()
			return &UnreachableError{Store: r.store, For: max(r.retryFor, 0), Err: err}
		}
		// Full jitter over the upper half: operations that failed together
		// do not all come back at the same instant.
		d := wait/2 + rand.N(wait/2+1)
		d = min(d, start.Add(r.retryFor).Sub(now))
		r.log.DebugContext(ctx, "store retry", slog.String("op", op), slog.Int("attempt", attempt),
			slog.Duration("wait", d), slog.Any("error", err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.clock.After(d):
		}
		wait = min(wait*2, retryMaxWait)
	}
}

func (r *Retrier) isDown() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.down
}

func (r *Retrier) gaveUp() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = true
}

// failing records a transient failure and announces the outage if it is
// the first one.
func (r *Retrier) failing(ctx context.Context, op string, err error) {
	r.mu.Lock()
	first := !r.outage
	r.outage = true
	r.mu.Unlock()
	if !first {
		return
	}
	r.log.WarnContext(ctx, "store unreachable; retrying", slog.String("store", r.store), slog.String("op", op),
		slog.Duration("retry_for", r.retryFor), slog.Any("error", err))
	if r.notify != nil {
		r.notify(err, r.retryFor)
	}
}

// answered records that the store answered.
func (r *Retrier) answered(ctx context.Context) {
	r.mu.Lock()
	was := r.outage
	r.outage, r.down = false, false
	r.mu.Unlock()
	if was {
		r.log.InfoContext(ctx, "store reachable again", slog.String("store", r.store))
	}
}
