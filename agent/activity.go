package agent

import (
	"context"
	"strings"
)

// Activity is one thing a worker does: a tool call, or a model call with
// the usage it added.
type Activity struct {
	// Tool is the tool called, or "model" for a model call: once as it
	// starts (Summary WaitingForModel, no usage), once with its usage.
	Tool string
	// Summary says on what: the path, the command, the turn.
	Summary string
	// Usage is what a model call used; zero for a tool call.
	Usage Usage
}

// WaitingForModel is the Summary of the "model" activity reported as a
// model call starts, before it has any usage.
const WaitingForModel = "waiting for the model"

// ActivityFunc hears of a worker's activities as they start.
type ActivityFunc func(Activity)

type activityKey struct{}

// WithActivityFunc returns a context whose agent conversations report each
// tool call and model call to f.
func WithActivityFunc(ctx context.Context, f ActivityFunc) context.Context {
	return context.WithValue(ctx, activityKey{}, f)
}

// report tells the context's ActivityFunc, if it has one, of a.
func report(ctx context.Context, a Activity) {
	if f, ok := ctx.Value(activityKey{}).(ActivityFunc); ok && f != nil {
		f(a)
	}
}

// callSummary says in a few words what a tool call is about.
func callSummary(name, rel string, a args) string {
	switch name {
	case ToolExecuteCommand:
		cmd, _, _ := strings.Cut(strings.TrimSpace(a.s("command")), "\n")
		return cmd
	case ToolNewTask:
		return "subtask in " + a.s("mode") + " mode"
	case ToolUseMCPTool:
		return a.s("server_name") + "/" + a.s("tool_name")
	case ToolAccessMCPResource:
		return a.s("server_name") + " " + a.s("uri")
	case ToolAttemptCompletion:
		return "finishing"
	case ToolAskFollowupQuestion:
		return "asking a question"
	}
	return rel
}
