// Package nodes wires the planner, the scheduler, the worktrees and the
// workers into taskloom's pipeline graph, and keeps the run registry.
//
//	START -> task_breakdown -> select_task
//	select_task -> implement_task -> verify_task                       (one task)
//	select_task -> implement_tasks_parallel ×N -> verify_tasks_parallel  (a batch)
//	verify_task -> select_task | implement_task (retry) | human_escalation | build_verification
//	verify_tasks_parallel -> select_task | human_escalation | build_verification
//	human_escalation -> select_task | END (abort)
//	build_verification -> END | select_task (culprit reverted) | human_escalation
//
// task_breakdown turns PRODUCT.md into the plan (an explicit task list is
// parsed, prose goes to the model). A plan with cycles escalates at once.
//
// select_task removes the worktrees of finished tries, propagates blocked
// and skipped tasks, and picks the next task, or up to Workers available
// tasks whose files are pairwise disjoint. When nothing is available but
// something is unfinished, the deadlock is escalated with each stuck task
// and what it waits on. With a batch of several tasks its router fans out
// one implement_tasks_parallel instance per task; they run concurrently in
// one super-step, and each one's result is recorded as soon as it
// finishes.
//
// implement_task runs the worker in the try's own worktree and commits
// what it changed. A try is numbered by its seq, which never restarts, so
// a review's retry gets a fresh worktree, trailer and conversation; if the
// process died during a try, the worker resumes its conversation in the
// try's worktree.
//
// verify_task checks that files_to_create exist and runs the tests in the
// worktree (see Verify). Only a passing try is integrated into main, in
// batch order (worktree.Manager.Integrate: conflict check with git
// merge-tree, then cherry-pick, exactly once by its trailer). A failure
// goes back to the task with the failing tests as its error: it is retried
// while attempts < max_attempts, then escalated. A conflict fails the try
// with the conflicting files, and is escalated as a conflict when the
// retries are used up.
//
// build_verification runs the build and the tests on main once every task
// is done. If main is broken it finds the culprit by building the parent
// of each integrated try, newest first: the first try whose parent passes
// broke main. It is reverted on main by a commit of its own, and its task
// fails with the build's error (retried, or escalated when out of
// attempts).
//
// human_escalation raises one graph interrupt per escalated task, carrying
// an EscalationPayload (reason: max_attempts, deadlock, cycle, conflict,
// question or build). The run stops interrupted; taskloom review records a
// Decision (fixed, retry with an optional note, skip, abort) for each, and
// resume acts on them.
//
// The state is a graph.State whose tasks and tries are keyed collections,
// so a checkpoint stores only what a step changed.
package nodes
