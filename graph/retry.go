package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

var jsonUnmarshal = json.Unmarshal

// Clock tells the time and waits. Tests inject a fake one. It is
// checkpoint.Clock, the type the savers' retries wait on, so one fake can
// serve both.
type Clock = checkpoint.Clock

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// sleep waits d on clock, or until ctx is done.
func sleep(ctx context.Context, clock Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-clock.After(d):
		return nil
	}
}

// RetryPolicy says how often a failing node is run again and how long the
// runtime waits in between. Interrupts are never retried.
type RetryPolicy struct {
	// MaxAttempts counts the first run; 0 or 1 means no retry.
	MaxAttempts int
	// InitialInterval is the wait before the second attempt.
	InitialInterval time.Duration
	// Multiplier grows the wait after each attempt; 0 means 2.
	Multiplier float64
	// MaxInterval caps the wait; 0 means no cap.
	MaxInterval time.Duration
	// RetryIfFunc reports whether an error is worth a retry; nil retries
	// every error except context cancellation.
	RetryIfFunc func(error) bool
}

func (p *RetryPolicy) validate() error {
	switch {
	case p.MaxAttempts < 0:
		return fmt.Errorf("retry: max attempts must be at least 0, got %d", p.MaxAttempts)
	case p.InitialInterval < 0 || p.MaxInterval < 0:
		return errors.New("retry: intervals must not be negative")
	case p.Multiplier < 0:
		return fmt.Errorf("retry: multiplier must not be negative, got %g", p.Multiplier)
	}
	return nil
}

// backoff returns the wait after the given failed attempt (1-based).
func (p *RetryPolicy) backoff(attempt int) time.Duration {
	m := p.Multiplier
	if m == 0 {
		m = 2
	}
	d := float64(p.InitialInterval)
	for i := 1; i < attempt; i++ {
		d *= m
		if p.MaxInterval > 0 && d >= float64(p.MaxInterval) {
			return p.MaxInterval
		}
	}
	return time.Duration(d)
}

func (p *RetryPolicy) retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrInterrupt) {
		return false
	}
	if p.RetryIfFunc != nil {
		return p.RetryIfFunc(err)
	}
	return true
}
