package nodes

import (
	"context"
	"fmt"
	"time"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/llm"
)

// Activity is what one attempt of a task is doing.
type Activity struct {
	TaskID string
	// Attempt is the attempt's number, as in its ref and trailer.
	Attempt int
	// Tool is the worker's tool, "model" for a model call, ActivityTests
	// or ActivityWait.
	Tool    string
	Summary string
	// Usage is what a model call used (Tool "model").
	Usage agent.Usage
	// Wait is how long the attempt waits for the provider, and Reason
	// why (ActivityWait).
	Wait   time.Duration
	Reason string
	// Worker is the process working the attempt, host:pid, when it is
	// not this one.
	Worker string
}

// Tools of the activities the pipeline reports itself.
const (
	ActivityTests = "tests"
	ActivityWait  = "provider_wait"
)

type activityKey struct{}

// WithActivityFunc returns a context under which the pipeline's nodes tell
// f what each attempt is doing as it happens: its worker's tool and model
// calls, its waits for the provider, its tests. Pass it to Runner.Start or
// Runner.Resume.
func WithActivityFunc(ctx context.Context, f func(Activity)) context.Context {
	return context.WithValue(ctx, activityKey{}, f)
}

func report(ctx context.Context, a Activity) {
	if f, ok := ctx.Value(activityKey{}).(func(Activity)); ok && f != nil {
		f(a)
	}
}

// watch returns ctx with hooks that report the worker's tool calls, model
// calls and provider waits as the attempt's activities.
func watch(ctx context.Context, taskID string, attempt int) context.Context {
	f, ok := ctx.Value(activityKey{}).(func(Activity))
	if !ok || f == nil {
		return ctx
	}
	f(Activity{TaskID: taskID, Attempt: attempt, Tool: "worker", Summary: "starting"})
	ctx = agent.WithActivityFunc(ctx, func(a agent.Activity) {
		f(Activity{TaskID: taskID, Attempt: attempt, Tool: a.Tool, Summary: a.Summary, Usage: a.Usage})
	})
	return llm.WithWaitFunc(ctx, func(w llm.WaitInfo) {
		if w.Shared {
			return // announced by the request that got the 429
		}
		f(Activity{TaskID: taskID, Attempt: attempt, Tool: ActivityWait, Wait: w.Wait, Reason: w.Reason,
			Summary: WaitSummary(w.Wait, w.Reason)})
	})
}

// WaitSummary says how long an attempt has left to wait for the provider,
// and why.
func WaitSummary(left time.Duration, reason string) string {
	return fmt.Sprintf("waiting for provider %ds (%s)", int((left+time.Second-1)/time.Second), reason)
}
