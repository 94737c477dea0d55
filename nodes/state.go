package nodes

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/verify"
)

// State is the pipeline's graph state. Tasks and attempts are keyed
// collections, so a checkpoint stores only the entries a step changed.
type State struct {
	RunID graph.Value[string] `json:"run_id"`
	// Branch is the run's target branch: the one checked out when it
	// started. The run integrates into it alone.
	Branch graph.Value[string] `json:"branch"`
	// Head is the last head of Branch the run recorded: the one it started
	// from, then each commit it integrated. Before each integration and at
	// resume, Branch must still contain it.
	Head        graph.Value[string]              `json:"head"`
	Milestones  graph.Value[[]planner.Milestone] `json:"milestones"`
	Tasks       graph.Keyed[planner.Task]        `json:"tasks"`
	Warnings    graph.Value[[]string]            `json:"warnings"`
	Cycles      graph.Value[[][]string]          `json:"cycles"`
	Batch       graph.Value[[]string]            `json:"batch"`
	Attempts    graph.Keyed[Attempt]             `json:"attempts"`
	Escalations graph.Value[[]Escalation]        `json:"escalations"`
	// Integrated lists the attempts integrated into main, in order, as
	// "TASK/ATTEMPT".
	Integrated graph.Append[string] `json:"integrated"`
	// Queue lists the attempts integrated since the branch last passed
	// build verification, in order: the merge queue that
	// build_verification checks, and bisects when the branch fails.
	Queue graph.Value[[]string] `json:"queue"`
	// Verified is the last head of Branch that passed build verification.
	Verified graph.Value[string] `json:"verified"`
	// Culprits are what the last bisection blamed, waiting for
	// revert_culprits.
	Culprits graph.Value[[]Culprit] `json:"culprits"`
	// Builds counts build verifications; it numbers their worktrees.
	Builds  graph.Value[int]    `json:"builds"`
	Outcome graph.Value[string] `json:"outcome"`
	// OutcomeReason says why a run ended failed or aborted, in a line.
	OutcomeReason graph.Value[string] `json:"outcome_reason"`
	Log           graph.Append[Entry] `json:"log"`

	// PlanUsage is what the breakdown's model calls used.
	PlanUsage graph.Value[llm.Usage] `json:"plan_usage"`
}

// Outcomes of a run that ended.
const (
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeAborted   = "aborted"
)

// Entry is one line of the run's log.
type Entry struct {
	Time   time.Time `json:"time"`
	TaskID string    `json:"task_id,omitempty"`
	Text   string    `json:"text"`
}

// Attempt records one attempt of a task.
type Attempt struct {
	TaskID string `json:"task_id"`
	// Attempt is the attempt number: 1-based, it counts every attempt the
	// task has had and never restarts (a review's retry goes on counting).
	// It is the one number users see, in the log, status, history, review
	// and events, and it names the attempt's worktree, branch, kept ref,
	// trailer and conversation. The task's Attempts, which max_attempts
	// bounds, counts only its failed verifications since the last review.
	Attempt  int    `json:"attempt"`
	Worktree string `json:"worktree"`
	Branch   string `json:"branch"`
	Commit   string `json:"commit,omitempty"`
	Changed  bool   `json:"changed"`
	// NoChange: the attempt changed nothing and its tests passed, so its
	// task completed with nothing to integrate.
	NoChange bool `json:"no_change,omitempty"`
	// Worker is what the worker reported.
	Worker       string `json:"worker,omitempty"`
	WorkerReason string `json:"worker_reason,omitempty"`
	Question     string `json:"question,omitempty"`
	// ProviderError: the model provider kept failing after its retries
	// (llm.max_retries). It costs no attempt: the task pauses for review.
	ProviderError string `json:"provider_error,omitempty"`
	// Resumed: the model provider had stopped this attempt, and it goes
	// on where it stopped, in the same worktree and conversation, after
	// a review's retry.
	Resumed bool `json:"resumed,omitempty"`
	// ReviewerNote is the note of the review's retry that lets it go on,
	// which the worker hears as it does.
	ReviewerNote     string  `json:"reviewer_note,omitempty"`
	ConversationID   string  `json:"conversation_id,omitempty"`
	InputTokens      int     `json:"input_tokens,omitempty"`
	OutputTokens     int     `json:"output_tokens,omitempty"`
	CacheReadTokens  int     `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int     `json:"cache_write_tokens,omitempty"`
	CostUSD          float64 `json:"cost_usd,omitempty"`
	UsageEstimated   bool    `json:"usage_estimated,omitempty"`
	UsageUnreported  bool    `json:"usage_unreported,omitempty"`
	// Tests is the verdict of the attempt's tests.
	Tests *verify.Verdict `json:"tests,omitempty"`
	// Diff is the attempt's diff against main, trimmed.
	Diff       string `json:"diff,omitempty"`
	Integrated string `json:"integrated,omitempty"`
	// Reverted is the commit that took the attempt back out of the target
	// branch after it broke the build there.
	Reverted  string   `json:"reverted,omitempty"`
	Conflicts []string `json:"conflicts,omitempty"`
	Error     string   `json:"error,omitempty"`
	Verified  bool     `json:"verified"`
	// Ignored lists the files git ignores that the attempt left in its
	// worktree, where its tests ran: a checkout of its commit lacks them.
	Ignored []string `json:"ignored,omitempty"`
	// Clean says that the worktree held nothing beyond the commit (and
	// the Include files) when the tests ran.
	Clean bool `json:"clean,omitempty"`
}

// NoChangeTasks returns the IDs of the completed tasks whose last attempt
// changed nothing, sorted.
func NoChangeTasks(s State) []string {
	last := map[string]Attempt{}
	for _, a := range s.Attempts.Values() {
		if prev, ok := last[a.TaskID]; !ok || a.Attempt > prev.Attempt {
			last[a.TaskID] = a
		}
	}
	var ids []string
	for id, a := range last {
		if t, ok := s.Tasks.Get(id); ok && a.NoChange && t.Status == planner.StatusCompleted {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// RunUsage returns what a run's model calls used: the breakdown's and
// every attempt's.
func RunUsage(s State) llm.Usage {
	u := s.PlanUsage.Get()
	for _, a := range s.Attempts.Values() {
		u = u.Add(a.Usage())
	}
	return u
}

// Usage returns the attempt's usage.
func (a Attempt) Usage() llm.Usage {
	return llm.Usage{InputTokens: a.InputTokens, OutputTokens: a.OutputTokens, CacheReadTokens: a.CacheReadTokens,
		CacheWriteTokens: a.CacheWriteTokens, CostUSD: a.CostUSD, Estimated: a.UsageEstimated, Unreported: a.UsageUnreported}
}

// UnmarshalJSON reads an attempt record, also as checkpoints written
// before attempts had one number stored it: "seq" was the attempt number
// and "attempt" a count that restarted after a review.
func (a *Attempt) UnmarshalJSON(b []byte) error {
	type plain Attempt
	var v struct {
		plain
		Seq int `json:"seq"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*a = Attempt(v.plain)
	if v.Seq > 0 {
		a.Attempt = v.Seq
	}
	return nil
}

// attemptKey is an Attempt's key in State.Attempts: "TASK/ATTEMPT".
func attemptKey(taskID string, attempt int) string {
	return taskID + "/" + itoa(attempt)
}

// LastAttempt returns the newest attempt of a task, if it had one.
func LastAttempt(s State, taskID string) (Attempt, bool) {
	n := nextAttempt(s, taskID) - 1
	if n < 1 {
		return Attempt{}, false
	}
	return s.Attempts.Get(attemptKey(taskID, n))
}

// CurrentAttempt returns the number of a task's attempt that is running
// or next to run: its last attempt while the task is in progress and that
// attempt has not failed (it is being verified or integrated), else the
// next one. Status and events show a task with it.
func CurrentAttempt(s State, taskID string) int {
	next := nextAttempt(s, taskID)
	t, ok := s.Tasks.Get(taskID)
	if !ok || t.Status != planner.StatusInProgress {
		return next
	}
	if a, ok := s.Attempts.Get(attemptKey(taskID, next-1)); ok && a.Error == "" && a.ProviderError == "" &&
		a.Question == "" && (a.Tests == nil || a.Verified) {
		return next - 1
	}
	return next
}

// AttemptLabel names attempt n of a task for a person: "attempt 2 of 3"
// while n is also the task's count toward max_attempts (tries), else
// "attempt 5, 2 of max_attempts 3", after a review's retry, say.
func AttemptLabel(n, tries, maxAttempts int) string {
	if n == tries {
		return fmt.Sprintf("attempt %d of %d", n, maxAttempts)
	}
	return fmt.Sprintf("attempt %d, %d of max_attempts %d", n, tries, maxAttempts)
}

// Culprit is an integrated attempt that broke the build on the target
// branch, found by bisection.
type Culprit struct {
	// Attempt is its key, "TASK/ATTEMPT".
	Attempt string `json:"attempt"`
	// Partner is the earlier attempt it breaks the build together with
	// when it passes on its own; it stays.
	Partner string `json:"partner,omitempty"`
	// Failure is the build's failure, the culprit's error for its retry.
	Failure string `json:"failure"`
}

// Escalation reasons.
const (
	ReasonMaxAttempts = "max_attempts"
	ReasonDeadlock    = "deadlock"
	ReasonCycle       = "cycle"
	ReasonConflict    = "conflict"
	ReasonQuestion    = "question"
	ReasonProvider    = "provider"
	ReasonBuild       = "build"
)

// Escalation is a task that needs a human.
type Escalation struct {
	TaskID string `json:"task_id"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

// Review actions.
const (
	ActionFixed = "fixed"
	ActionRetry = "retry"
	ActionSkip  = "skip"
	ActionAbort = "abort"
)

// Decision is a human's answer to an escalation.
type Decision struct {
	Action string `json:"action"`
	Note   string `json:"note,omitempty"`
}
