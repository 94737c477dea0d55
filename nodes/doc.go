// Package nodes wires the planner, the scheduler, the worktrees and the
// workers into taskloom's pipeline graph, and keeps the run registry.
//
//	START -> task_breakdown -> select_task
//	select_task -> implement_task -> verify_task -> integrate                       (one task)
//	select_task -> implement_tasks_parallel ×N -> verify_tasks_parallel -> integrate  (a batch)
//	integrate -> build_verification | select_task | implement_task (retry) | human_escalation
//	human_escalation -> select_task | END (abort)
//	build_verification -> END | select_task | revert_culprits | human_escalation
//	revert_culprits -> build_verification
//
// task_breakdown turns PRODUCT.md into the plan (an explicit task list is
// parsed, prose goes to the model). The tasks outside a dependency cycle
// run first; once nothing else can run, select_task escalates each task of
// the cycle with its path.
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
// implement_task runs the worker in the attempt's own worktree and
// commits what it changed. An attempt has one number, 1-based, counting
// every attempt of its task: a review's retry goes on counting, so it gets
// a fresh worktree, trailer, kept ref and conversation (the task's
// Attempts, which max_attempts bounds, restarts instead). If the process
// died during an attempt, the worker resumes its conversation there.
//
// verify_task decides: it asks verify/ for each try's verdict in its
// worktree (the task's test_files first, then the configured command) and
// records it. A failing try goes back to its task with the failing tests
// as its error: it is retried while attempts < max_attempts, then
// escalated. A try whose tests cannot run at all fails the same way; it
// never ends the run.
//
// integrate asks worktree/ to integrate the passing tries, once each, in
// batch order (worktree.Manager.Integrate: conflict check with git
// merge-tree, then cherry-pick, exactly once by its trailer), after
// checking that the user did not reset the branch under the run. A
// conflict fails the try with the conflicting files, and is escalated as a
// conflict when the retries are used up.
//
// build_verification is a merge queue: after each batch it integrated, it
// runs the build and the tests once on the target branch's head (without
// a build command, a single fast-forwarded try was tested on that very
// tree and skips it, unless its worker left files git ignores in its
// worktree, which the branch does not have), and once
// more when every task is done unless that head passed already. When the
// branch fails it bisects over the batch's tries, building the branch as
// it was after the first k of them, in about log2(n) builds, to find the
// try whose integration broke it; when that try passes on its own, a
// second bisection finds the earlier try it clashes with. Every build is
// a line of the run's log. revert_culprits reverts the culprit on the
// branch by a commit of its own, integrated exactly once, and fails its
// task with the build's failure (retried, or escalated when out of
// attempts); build_verification then checks the branch again.
//
// human_escalation raises one graph interrupt per escalated task, carrying
// an EscalationPayload (reason: max_attempts, deadlock, cycle, conflict,
// question or build) with a ref of the last attempt's work that git show
// accepts: refs/taskloom/attempts/RUN_ID/TASK_ID/ATTEMPT, kept until the
// run ends (Runner drops them then). The run stops interrupted; taskloom review records a
// Decision (fixed, retry with an optional note, skip, abort) for each, and
// resume acts on them.
//
// The state is a graph.State whose tasks and tries are keyed collections,
// so a checkpoint stores only what a step changed.
package nodes
