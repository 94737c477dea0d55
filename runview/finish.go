package runview

import (
	"fmt"
	"strings"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/scheduler"
)

// Landed tells the view, before Finish, the tasks whose attempts were
// integrated as the run stopped but not recorded yet, each with its commit:
// the summary says so instead of "not done".
func (v *View) Landed(commits map[string]string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.landed = commits
}

// Finish stops the live view and says how the call ended: with JSON the
// usage and run_finished events; else what happened to every task, the
// usage and cost, and what to do next. With status interrupted, the last
// line is the command that resumes the run. An empty status means the run
// never started (it has no state).
func (v *View) Finish(res graph.Result[nodes.State], status string, exitCode int) {
	if v.live != nil {
		v.live.stop()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	usage := nodes.NewUsageReport(v.finalUsage(res.State, status), v.opts.Model)
	if v.opts.JSON {
		ev := v.tr.Event(nodes.EventUsage)
		ev.Usage = usage
		fin := v.tr.Event(nodes.EventRunFinished)
		fin.Status, fin.ExitCode, fin.Reason = status, exitCode, outcomeReason(res.State, status)
		v.emit(ev, fin)
		return
	}
	id := v.opts.RunID
	sum := scheduler.Summarize(res.State.Tasks.Values())
	if status == "" {
		status = "-"
	}
	v.println(fmt.Sprintf("run %s: %s (%s: %d of %d tasks completed)", id, status, sum.Progress, sum.Completed, sum.Total))
	fates := nodes.Fates(res.State)
	idWidth := 0
	for _, f := range fates {
		idWidth = max(idWidth, len(f.TaskID))
	}
	for _, f := range fates {
		line := f.String()
		if c := v.landed[f.TaskID]; c != "" && f.Fate == nodes.FateNotDone {
			line = fmt.Sprintf("integrated (%.10s) as the run stopped; resume records it", c)
		}
		v.println(fmt.Sprintf("  %-*s  %s", idWidth, f.TaskID, line))
	}
	v.println("usage: " + usage.String())
	if ids := nodes.NoChangeTasks(res.State); len(ids) > 0 {
		v.println(fmt.Sprintf("no_change: true for %s (completed: the tests passed, but the worker changed nothing)", strings.Join(ids, ", ")))
	}
	if why := outcomeReason(res.State, status); why != "" {
		v.println("why: " + why)
	}
	switch status {
	case nodes.RunPaused:
		db := v.opts.NextFlags
		v.printCommand(fmt.Sprintf("paused for human review: taskloom review %s%s, then taskloom resume %s%s", id, db, id, db))
	case nodes.RunPartial:
		v.println(fmt.Sprintf("ended partial: %d skipped, %d blocked; the rest is done", sum.Skipped, sum.Blocked))
	case nodes.RunInterrupted:
		if exitCode == 130 {
			v.println("stopped; the attempt cut short does not count against max_attempts. Resume with:")
		} else {
			// Stopped by an error, which stderr names.
			v.println("stopped by the error below; once it is fixed, resume with:")
		}
		v.printCommand("taskloom resume " + id + v.opts.NextFlags)
	}
}

// outcomeReason is why a run that ended failed or aborted did, or "".
func outcomeReason(s nodes.State, status string) string {
	if status != nodes.RunFailed && status != nodes.RunAborted {
		return ""
	}
	return s.OutcomeReason.Get()
}

// finalUsage is the run's usage as its summary gives it: what its state
// records, or, for a run stopped with attempts cut short, what the view
// saw the model calls use when that is more. A cut-short attempt is not
// checkpointed, yet its calls were made and billed. The caller holds mu.
func (v *View) finalUsage(s nodes.State, status string) llm.Usage {
	recorded := nodes.RunUsage(s)
	seen := v.base
	seen.Add(v.spent)
	if status != nodes.RunInterrupted || seen.InputTokens+seen.OutputTokens <= recorded.InputTokens+recorded.OutputTokens {
		return recorded
	}
	return llm.Usage{InputTokens: seen.InputTokens, OutputTokens: seen.OutputTokens, CacheReadTokens: seen.CacheReadTokens,
		CacheWriteTokens: seen.CacheWriteTokens, CostUSD: seen.CostUSD, Estimated: seen.Estimated, Unreported: seen.Unreported || recorded.Unreported}
}
