package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/taskloom/taskloom/planner"
)

// Worker implements one task attempt in its worktree. The pipeline's
// implement_task node calls it; the task's tests, run afterwards, decide
// whether the attempt passed.
type Worker interface {
	Implement(ctx context.Context, job Job) (Outcome, error)
}

// WorkerFunc adapts a function to Worker.
type WorkerFunc func(ctx context.Context, job Job) (Outcome, error)

// Implement calls f.
func (f WorkerFunc) Implement(ctx context.Context, job Job) (Outcome, error) { return f(ctx, job) }

var (
	_ Worker = (*AgentWorker)(nil)
	_ Worker = (*CommandWorker)(nil)
	_ Worker = (*Ralph)(nil)
	_ Worker = WorkerFunc(nil)
)

// Job is one task attempt.
type Job struct {
	RunID string       `json:"run_id"`
	Task  planner.Task `json:"task"`
	// Attempt is the attempt number, from 1: it counts every attempt of
	// the task (a review's retry goes on counting) and names the
	// conversation. The prompt's "Attempt: n of max" shows instead the
	// task's progress toward MaxAttempts, Task.Attempts+1. MaxAttempts of
	// zero means Task.MaxAttempts.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`
	// Worktree is the attempt's git worktree.
	Worktree string `json:"worktree"`
	// PreviousError is the error context of the previous attempt (failing
	// tests, a merge conflict).
	PreviousError string `json:"previous_error,omitempty"`
	// ReviewerNote is a person's note from taskloom review. For an agent
	// conversation waiting on a question, it is the answer.
	ReviewerNote string `json:"reviewer_note,omitempty"`
	// Iteration is the Ralph loop iteration, from 1; zero outside one.
	Iteration int `json:"iteration,omitempty"`
	// Instructions are added at the end of the prompt (the Ralph loop adds
	// its promise rules).
	Instructions string `json:"instructions,omitempty"`
	// ConversationID overrides the agent worker's conversation ID, which is
	// otherwise ConversationID(RunID, Task.ID, Attempt, Iteration).
	ConversationID string `json:"conversation_id,omitempty"`
	// Restart says the worktree was created anew for this call (after a
	// crash, say): a stored conversation of this attempt no longer matches
	// the files, so the agent worker starts it over under the same ID
	// instead of resuming it.
	Restart bool `json:"restart,omitempty"`
}

// OutcomeStatus is what a worker reports about its attempt.
type OutcomeStatus string

// Outcome statuses.
const (
	// OutcomeDone: the worker says the task is complete.
	OutcomeDone OutcomeStatus = "done"
	// OutcomeIncomplete: the worker stopped without saying so (a limit, a
	// non-zero exit, a timeout). The tests may still pass.
	OutcomeIncomplete OutcomeStatus = "incomplete"
	// OutcomeBlocked: the worker says it cannot proceed, or it stagnated.
	OutcomeBlocked OutcomeStatus = "blocked"
	// OutcomeQuestion: the worker needs a person's answer; escalate.
	OutcomeQuestion OutcomeStatus = "question"
	// OutcomeProvider: the model provider kept failing after its retries;
	// Detail has its error. It is not the attempt's fault: the task
	// pauses for review without using up an attempt.
	OutcomeProvider OutcomeStatus = "provider"
)

// Outcome is the result of one attempt.
type Outcome struct {
	Status OutcomeStatus `json:"status"`
	// Detail says why, for any status but done.
	Detail string `json:"detail,omitempty"`
	// Summary is the worker's own account: the completion text, or the
	// CLI's result.
	Summary  string `json:"summary,omitempty"`
	Question string `json:"question,omitempty"`
	// AgentReason is the agent loop's ending, for the agent worker.
	AgentReason    Reason `json:"agent_reason,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
	// SessionID is an external CLI's session, when it reports one.
	SessionID string `json:"session_id,omitempty"`
	// ExitCode is the command worker's exit code (-1 when it was killed).
	ExitCode     *int     `json:"exit_code,omitempty"`
	Usage        Usage    `json:"usage"`
	FilesChanged []string `json:"files_changed,omitempty"`
	Todos        []Todo   `json:"todos,omitempty"`
	// Iterations is the number of Ralph iterations run.
	Iterations int `json:"iterations,omitempty"`
	// Output is the command worker's output, head and tail.
	Output string `json:"output,omitempty"`
}

// BuildPrompt returns the first user message of a task attempt. It starts
// with the lines "Task: <ID> — <title>" and "Attempt: <n> of <max>" (the
// prompt contract), followed by the user story, the acceptance
// criteria, the files, the notes, the previous error and the reviewer's
// note. n is the task's progress toward max_attempts (Task.Attempts+1),
// which restarts after a review's retry, not the attempt number.
func BuildPrompt(job Job) string {
	t := job.Task
	n := t.Attempts + 1
	maxAttempts := job.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = t.MaxAttempts
	}
	maxAttempts = max(maxAttempts, n)
	var b strings.Builder
	fmt.Fprintf(&b, "Task: %s — %s\n", t.ID, t.Title)
	fmt.Fprintf(&b, "Attempt: %d of %d\n", n, maxAttempts)
	if job.Iteration > 0 {
		fmt.Fprintf(&b, "Iteration: %d\n", job.Iteration)
	}
	if t.UserStory != "" {
		fmt.Fprintf(&b, "\nUser story: %s\n", t.UserStory)
	}
	if len(t.AcceptanceCriteria) > 0 {
		b.WriteString("\nAcceptance criteria:\n")
		for _, c := range t.AcceptanceCriteria {
			fmt.Fprintf(&b, "- %s\n", c)
		}
	}
	files := []struct {
		label string
		list  []string
	}{{"Files to create", t.FilesToCreate}, {"Files to modify", t.FilesToModify}, {"Test files", t.TestFiles}}
	wrote := false
	for _, f := range files {
		if len(f.list) == 0 {
			continue
		}
		if !wrote {
			b.WriteString("\n")
			wrote = true
		}
		fmt.Fprintf(&b, "%s: %s\n", f.label, strings.Join(f.list, ", "))
	}
	if t.ImplementationNotes != "" {
		fmt.Fprintf(&b, "\nImplementation notes: %s\n", t.ImplementationNotes)
	}
	if job.PreviousError != "" {
		fmt.Fprintf(&b, "\nThe previous attempt failed. Its error:\n%s\n", strings.TrimRight(job.PreviousError, "\n"))
		if job.Restart && job.Iteration <= 1 {
			// Paths in the error name files that may not exist here: a
			// worker that does not know would edit what is not there.
			b.WriteString("This attempt starts from the main branch as it is now: the previous attempt's changes are not in this worktree, so write again whatever the task needs.\n")
		}
	}
	if job.ReviewerNote != "" {
		fmt.Fprintf(&b, "\nNote from the reviewer: %s\n", job.ReviewerNote)
	}
	b.WriteString("\nWork in the current directory, the task's git worktree. Implement the task completely, make its tests pass, and do not commit: taskloom verifies and integrates the work.\n")
	if job.Instructions != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimRight(job.Instructions, "\n"))
	}
	return b.String()
}

// AgentWorkerOpts configures an AgentWorker; nil means defaults.
type AgentWorkerOpts struct {
	// Mode is the conversation's mode; "" means the agent's default.
	Mode string
	// Accounting, when set, receives the usage of every attempt.
	Accounting *Accounting
}

// AgentWorker is the built-in agent as a Worker.
type AgentWorker struct {
	agent *Agent
	opts  AgentWorkerOpts
}

// NewAgentWorker returns a worker that runs a's loop for each job.
func NewAgentWorker(a *Agent, opts *AgentWorkerOpts) *AgentWorker {
	w := &AgentWorker{agent: a}
	if opts != nil {
		w.opts = *opts
	}
	return w
}

// Implement runs the job's conversation. It is idempotent per
// conversation ID: a conversation that exists already is resumed when it
// was interrupted (active, waiting for a subtask, cancelled or failed), is
// answered with the job's ReviewerNote when it asked a question, and is
// otherwise returned as it ended. With Job.Restart it is started over
// instead. Give a new try of the same attempt number its own
// Job.ConversationID.
func (w *AgentWorker) Implement(ctx context.Context, job Job) (Outcome, error) {
	id := job.ConversationID
	if id == "" {
		id = ConversationID(job.RunID, job.Task.ID, job.Attempt, job.Iteration)
	}
	before := map[string]Usage{}
	var res *Result
	var err error
	rec, lerr := w.agent.store.Load(ctx, id)
	switch {
	case errors.Is(lerr, ErrNotFound) || (lerr == nil && job.Restart):
		res, err = w.agent.run(ctx, Request{ID: id, Task: BuildPrompt(job), Worktree: job.Worktree, Mode: w.opts.Mode}, job.Restart)
	case lerr != nil:
		return Outcome{Status: OutcomeIncomplete, ConversationID: id, Detail: lerr.Error()}, fmt.Errorf("agent worker: %w", lerr)
	default:
		prev, perr := w.agent.resultOf(ctx, rec)
		if perr == nil {
			before = prev.ByConversation
		}
		switch {
		case rec.Meta.Status == StatusQuestion && job.ReviewerNote != "":
			res, err = w.agent.Resume(ctx, id, &ResumeOpts{Worktree: job.Worktree, Answer: job.ReviewerNote})
		case rec.Meta.Status == StatusActive || rec.Meta.Status == StatusAwaitingSubtask ||
			rec.Meta.Reason == ReasonCancelled || rec.Meta.Reason == ReasonError || rec.Meta.Reason == ReasonProvider:
			res, err = w.agent.Resume(ctx, id, &ResumeOpts{Worktree: job.Worktree, Note: job.ReviewerNote})
		default:
			res, err = prev, perr
		}
	}
	out := Outcome{ConversationID: id}
	if res == nil {
		out.Status, out.Detail = OutcomeIncomplete, fmt.Sprint(err)
		return out, fmt.Errorf("agent worker: %w", err)
	}
	if w.opts.Accounting != nil {
		for cid, u := range res.ByConversation {
			d := u
			if b, ok := before[cid]; ok {
				d = u.Sub(b)
			}
			if d != (Usage{}) {
				w.opts.Accounting.Add(job.RunID, job.Task.ID, cid, d)
			}
		}
	}
	out.AgentReason = res.Reason
	out.Usage = res.Usage
	out.FilesChanged = res.FilesChanged
	out.Todos = res.Todos
	out.Summary = res.Completion
	out.Detail = res.Detail
	switch res.Reason {
	case ReasonCompleted:
		out.Status, out.Detail = OutcomeDone, ""
	case ReasonQuestion:
		out.Status, out.Question = OutcomeQuestion, res.Question
	case ReasonProvider:
		out.Status = OutcomeProvider
	default:
		out.Status = OutcomeIncomplete
		out.Detail = fmt.Sprintf("%s: %s", res.Reason, res.Detail)
	}
	if err != nil {
		return out, fmt.Errorf("agent worker: %w", err)
	}
	return out, nil
}
