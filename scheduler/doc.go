// Package scheduler decides which tasks run next, moves tasks through their
// attempts, detects deadlocks, summarizes progress and simulates a plan's
// makespan. Everything here is a pure function over a
// []planner.Task: nothing is stored and the input is never modified.
//
// # Selection
//
// A task is available when it is pending and every dependency is a known
// task that is completed (a skipped dependency does not count: its
// dependents are blocked). Available tasks are ordered by
//
//  1. priority, critical first;
//  2. milestone, in Opts.MilestoneOrder (milestones not listed come last);
//  3. the longest remaining dependency chain, longest first;
//  4. ID, in natural order (T2 before T10, T1-a before T1-b).
//
// Priority and milestone are inherited backwards along dependencies: a task
// ranks as urgent as the most urgent unfinished task that waits on it,
// directly or not, and as early as the earliest milestone among them.
// Without this, a critical task would wait behind every high task because
// the low task it depends on sorts last (priority inversion); with it, the
// keys keep their meaning for the work that can actually start.
//
// The remaining chain of a task is the heaviest path from it through its
// unfinished dependents, the task included, where a task weighs its
// estimated_minutes, or 1 when it has no estimate (see Minutes): without
// estimates the chain is a count of tasks. Ordering by it runs the critical
// path first.
//
// SelectBatch takes available tasks in that order and keeps those whose
// files (create, modify and test, compared after path.Clean) overlap
// neither a task already chosen nor a task in progress, up to N.
//
// # Attempts
//
//	pending --Start--> in_progress --Pass--> completed
//	                       |
//	                      Fail: attempts+1, error set
//	                       |-- attempts < max_attempts --> pending (retried)
//	                       '-- otherwise ----------------> failed (escalate)
//
// max_attempts defaults to DefaultMaxAttempts (3). A human's decision on an
// escalated task is Retry (attempts back to 0, optional note), Skip, or Fix
// (done by hand). Every transition returns a new list in which blocking has
// been propagated: a pending task whose dependency is failed, skipped or
// blocked becomes blocked (a skipped dependent stays skipped), and a
// blocked task whose dependencies have recovered becomes pending again.
//
// Deadlock reports, when no task is available or in progress but some are
// pending or blocked, each of those with the dependencies it waits on:
// "deadlock: T3 waits on T2 (failed); T4 waits on T3 (blocked), T9
// (unknown)".
//
// # Progress
//
// Summarize counts tasks by status. Its progress is completed over total,
// rounded down, as in design doc 004 (7 of 10 completed is "70%"); skipped
// tasks do not count as done, so a run with skips never reads 100%.
//
// # Simulation
//
// Simulate list-schedules the plan on N workers with the rules above:
// whenever a worker is free it takes the first task in selection order whose
// dependencies have finished and whose files no running task holds. It
// returns the makespan, the lower bound max(critical path, total minutes /
// N), the critical path and every task's slot. Because the simulation uses
// the very order the run uses, its makespan is what the run would take if
// the estimates held. PlanSchedule adapts it to planner.ScheduleFunc.
//
// BenchmarkSchedule reports makespan/lower_bound on random plans of 500
// tasks with random priorities and five milestones.
package scheduler
