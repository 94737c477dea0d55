package llm

import (
	"context"
	"sync"
	"time"
)

// Limiter paces the requests of every worker of a run to one provider. It
// spaces requests evenly to a rate (requests per minute), and a provider's
// 429 pauses everyone until the wait it asked for is over. It is safe for
// concurrent use.
type Limiter struct {
	mu       sync.Mutex
	interval time.Duration // between two requests; 0 paces nothing
	next     time.Time     // the earliest start of the next request
	paused   time.Time     // no request starts before this
	now      func() time.Time
	sleep    func(context.Context, time.Duration) error
}

// LimiterOpts configures a Limiter; nil means defaults.
type LimiterOpts struct {
	// NowFunc reads the clock; nil means time.Now.
	NowFunc func() time.Time
	// SleepFunc waits for a duration or until the context ends; nil means
	// a timer.
	SleepFunc func(context.Context, time.Duration) error
}

// NewLimiter returns a limiter allowing perMinute requests a minute, spaced
// evenly; 0 or less paces nothing and only honours Pause.
func NewLimiter(perMinute int, opts *LimiterOpts) *Limiter {
	l := &Limiter{now: time.Now, sleep: sleepCtx}
	if perMinute > 0 {
		l.interval = time.Minute / time.Duration(perMinute)
	}
	if opts != nil {
		if opts.NowFunc != nil {
			l.now = opts.NowFunc
		}
		if opts.SleepFunc != nil {
			l.sleep = opts.SleepFunc
		}
	}
	return l
}

// Wait blocks until the caller may send a request and returns how long it
// waited and why: KindRateLimit for a pause a 429 imposed, "pacing" for
// the configured rate.
func (l *Limiter) Wait(ctx context.Context) (time.Duration, string, error) {
	var waited time.Duration
	reason := ""
	for {
		// Reserve the next free slot, so that waiters go in turn.
		l.mu.Lock()
		now := l.now()
		start, why := now, "pacing"
		if l.interval > 0 && l.next.After(start) {
			start = l.next
		}
		if l.paused.After(start) {
			start, why = l.paused, KindRateLimit
		}
		if l.interval > 0 {
			l.next = start.Add(l.interval)
		}
		l.mu.Unlock()
		d := start.Sub(now)
		if d <= 0 {
			return waited, reason, nil
		}
		// The caller learns of the wait before it starts: one that keeps
		// time (a worker's deadline) must not run out meanwhile.
		tellCaller(ctx, WaitInfo{Reason: why, Wait: d, Shared: true})
		if err := l.sleep(ctx, d); err != nil {
			return waited, reason, err
		}
		waited += d
		if reason == "" || why == KindRateLimit {
			reason = why
		}
		// A 429 elsewhere may have paused everyone while this caller
		// slept: then it waits again.
		l.mu.Lock()
		held := l.paused.After(l.now())
		l.mu.Unlock()
		if !held {
			return waited, reason, nil
		}
	}
}

// Pause holds every request back until d from now (a 429's retry-after).
// A shorter pause than one already in force changes nothing.
func (l *Limiter) Pause(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := l.now().Add(d); until.After(l.paused) {
		l.paused = until
	}
}
