package testkit

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Clock is a fake clock whose waits return at once and move it on by what
// they waited, so tests of retries and pacing take no time and can check
// each wait. It has both kinds of wait the packages take: After, as
// graph.Clock has it, and Sleep, as llm's limiter takes it.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

// NewClock returns a Clock that starts at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// wait records d and moves the clock on by it, returning the new time.
func (c *Clock) wait(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	return c.now
}

// After records the wait and fires at once with the moved-on time.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	ch <- c.wait(d)
	return ch
}

// Sleep records the wait and returns at once, with ctx's error if it is
// done.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	c.wait(d)
	return ctx.Err()
}

// Waits returns the waits so far, in order.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.waits)
}
