package nodes

import (
	"fmt"
	"strings"

	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/planner"
)

// UsageReport is a run's usage as status --json, the usage event and the
// run summary show it. CostUSD is null when the model has no price (see
// llm.PriceOf): no cost rather than a wrong one.
type UsageReport struct {
	InputTokens      int      `json:"input_tokens"`
	OutputTokens     int      `json:"output_tokens"`
	CacheReadTokens  int      `json:"cache_read_tokens"`
	CacheWriteTokens int      `json:"cache_write_tokens"`
	CostUSD          *float64 `json:"cost_usd"`
	Estimated        bool     `json:"estimated"`
	// Unreported: an agent CLI reported no usage for its calls, which
	// none of the counts include. Absent when false, so that the usage
	// object keeps its documented keys.
	Unreported bool `json:"unreported,omitempty"`
}

// NewUsageReport reports u, priced for the model spec. A cost that u
// carries is reported whatever the model: an external agent CLI reports
// what its calls cost, in a model the price table need not know.
func NewUsageReport(u llm.Usage, model string) UsageReport {
	r := UsageReport{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens, Estimated: u.Estimated, Unreported: u.Unreported}
	if _, ok := llm.PriceOf(model); ok || u.CostUSD > 0 {
		cost := u.CostUSD
		r.CostUSD = &cost
	}
	return r
}

// String is the usage on one line.
func (r UsageReport) String() string {
	s := fmt.Sprintf("%d input, %d output, %d cache read, %d cache write tokens", r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheWriteTokens)
	if r.Estimated {
		s += " (partly estimated: a provider reported no usage)"
	}
	if r.CostUSD != nil {
		s += fmt.Sprintf(", $%.4f", *r.CostUSD)
	} else {
		s += ", no cost (the model is not in the price table)"
	}
	if r.Unreported {
		s += "; not counted: the agent CLI's own calls (it reported no usage)"
	}
	return s
}

// What happened to a task, as the end of a run tells it.
const (
	FateIntegrated = "integrated"
	FateNoChange   = "no change"
	FateFixed      = "fixed by hand" // a reviewer's decision completed it
	FateSkipped    = "skipped"
	FateBlocked    = "blocked"
	FateFailed     = "failed"
	FateNotDone    = "not done" // pending or in progress: the run stopped first
)

// TaskFate is what happened to one task of a run.
type TaskFate struct {
	TaskID string
	Title  string
	Fate   string
	// Commit is the integrated commit (FateIntegrated).
	Commit string
	// BlockedBy lists the dependencies that did not complete (FateBlocked).
	BlockedBy []string
	// Why is the error of a failed task, or the reason of a skipped one.
	Why string
	// Attempts is how many attempts the task had.
	Attempts int
	Usage    llm.Usage
}

// Fates says what happened to every task of a run, in plan order.
func Fates(s State) []TaskFate {
	last := map[string]Attempt{}
	usage := map[string]llm.Usage{}
	for _, a := range s.Attempts.Values() {
		if prev, ok := last[a.TaskID]; !ok || a.Attempt > prev.Attempt {
			last[a.TaskID] = a
		}
		usage[a.TaskID] = usage[a.TaskID].Add(a.Usage())
	}
	var out []TaskFate
	for _, t := range s.Tasks.Values() {
		f := TaskFate{TaskID: t.ID, Title: t.Title, Usage: usage[t.ID], Attempts: last[t.ID].Attempt}
		switch t.Status {
		case planner.StatusCompleted:
			a := last[t.ID]
			switch c := integratedCommit(s, t.ID); {
			case c != "":
				f.Fate, f.Commit = FateIntegrated, c
			case a.Attempt > 0 && !a.NoChange && (a.Error != "" || !a.Verified):
				// Its last attempt failed, yet it completed: a reviewer
				// said it was fixed by hand.
				f.Fate = FateFixed
			default:
				f.Fate = FateNoChange
			}
		case planner.StatusSkipped:
			f.Fate = FateSkipped
			if t.Error == planner.RemovedReason {
				// A replan's skip says why (a review's leaves the
				// failure the reviewer saw).
				f.Why = t.Error
			}
		case planner.StatusBlocked:
			f.Fate = FateBlocked
			for _, d := range t.Dependencies {
				if dep, ok := s.Tasks.Get(d); ok && dep.Status != planner.StatusCompleted {
					f.BlockedBy = append(f.BlockedBy, fmt.Sprintf("%s (%s)", d, dep.Status))
				}
			}
		case planner.StatusFailed:
			f.Fate, f.Why = FateFailed, clip.Line(t.Error, 160)
		default:
			f.Fate = FateNotDone
			// An escalated task waits for its review, which says why.
			for _, e := range s.Escalations.Get() {
				if e.TaskID == t.ID {
					f.Why = "waiting for a review (" + e.Reason + "): " + clip.Line(e.Error, 120)
				}
			}
		}
		out = append(out, f)
	}
	return out
}

// integratedCommit returns the commit that integrated a task's newest
// integrated attempt, or "".
func integratedCommit(s State, taskID string) string {
	best, commit := 0, ""
	for _, a := range s.Attempts.Values() {
		if a.TaskID == taskID && a.Integrated != "" && a.Reverted == "" && a.Attempt > best {
			best, commit = a.Attempt, a.Integrated
		}
	}
	return commit
}

// String is the fate in a few words: "integrated (abc1234)", "blocked by
// T2 (skipped)", "failed: the tests fail".
func (f TaskFate) String() string {
	switch {
	case f.Fate == FateIntegrated:
		return fmt.Sprintf("integrated (%s)", short(f.Commit))
	case f.Fate == FateBlocked && len(f.BlockedBy) > 0:
		return "blocked by " + strings.Join(f.BlockedBy, ", ")
	case f.Why != "":
		return f.Fate + ": " + f.Why
	}
	return f.Fate
}
