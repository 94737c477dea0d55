// Package worktree gives each task attempt its own git worktree and brings
// verified attempts back onto the main branch exactly once.
//
// Every write goes through the git command line (worktree, add, commit,
// merge-tree, commit-tree, update-ref, merge); nothing here writes the
// repository through a library. Commits use a fixed identity (Opts), so
// machines without a configured git identity work; commit hooks do not
// run and commits are not signed.
//
// # Layout
//
// The attempt RUN/TASK/ATTEMPT lives on branch taskloom/RUN/TASK/ATTEMPT,
// checked out at <repo>/.taskloom/worktrees/RUN-TASK-ATTEMPT, made from
// main's head when it is created. Open adds ".taskloom/" to
// .git/info/exclude and refuses to start when the checkout of main has
// uncommitted changes to tracked files. Untracked files matching
// Opts.Include (".env", say) are copied into each new worktree, and never
// committed from it.
//
// # Commit
//
// Commit stages everything (git add -A, so .gitignore, .git/info/exclude
// and core.excludesFile apply) and leaves exactly one commit on top of the
// attempt's start, with the trailer "Taskloom-Task: RUN/TASK/ATTEMPT".
// A worker that changed nothing gets no commit and changed == false.
//
// # Integration: cherry-pick, computed in memory
//
// Integrate applies an attempt as a cherry-pick of its one commit onto
// main's current head, not by rebasing the attempt's branch and
// fast-forwarding. The reasons:
//
//   - The conflict check is the application. `git merge-tree --write-tree`
//     (with the attempt's parent as merge base) computes the cherry-pick's
//     tree in the object database without touching any working tree, index
//     or ref; if it reports conflicts, a *ConflictError lists the files and
//     main is byte-identical to before, since nothing was written. If not,
//     `git commit-tree` makes the commit from that very tree (with the
//     attempt's message, trailer and author), so what was checked is what
//     lands. A rebase would need a working tree, stop half-way on a
//     conflict and have to be aborted.
//   - The attempt's branch is left as the worker made it, for review.
//   - Main gets one linear commit per attempt, carrying its trailer. When
//     main has not moved since the attempt started, the attempt's own
//     commit is used as is (a fast-forward).
//
// Main then moves with a compare-and-swap from the head the result was
// computed on. If main is checked out nowhere, that is
// `git update-ref refs/heads/MAIN NEW OLD`. If some worktree has it checked
// out (the repository folder or any other), it is `git merge --ff-only NEW`
// run in that worktree, so its files and index follow; git refuses when
// local changes are in the way, and Integrate returns a *DirtyError with
// main unchanged. Main therefore never has to be checked out in the
// repository folder: the folder may sit on another branch, which is never
// touched, and main may be checked out in another worktree or nowhere. The
// main branch defaults to the folder's branch; set Opts.MainBranch when
// the folder is on something else.
//
// # Exactly once and order
//
// Before applying, Integrate looks for the attempt's trailer in main's
// history (once in full per Manager, then only the new commits) and
// reports AlreadyIntegrated if it is there, so a run resumed after a crash
// never applies an attempt twice. Integrations are serialized by a mutex
// and, across processes, by an flock on the git directory's
// taskloom-integrate.lock; if main still moved underneath (another tool),
// the CAS fails and Integrate starts over. IntegrateAll applies several
// finished attempts in the caller's task order, whatever order they
// finished in.
//
// # The user's branch
//
// Main is the user's: taskloom never redoes or undoes what the user did to
// it. Commit folds only the commits made on top of the attempt's base (the
// main commit it started from, kept in the branch's reflog), so commits the
// user dropped from main since never ride along. Integrate refuses with a
// *ResetError, main unchanged, when main no longer contains that base;
// CheckHead does the same for any head a caller recorded, and
// IntegratedAttempts lists which of a run's attempts main still carries.
// LockBranch makes one run the live run of a branch, with an flock on
// taskloom-live-BRANCH.lock in the git directory, which the kernel drops
// when its holder dies.
//
// # Guarding and confining a worker
//
// A worktree shares its refs, config and hooks with the user's repository,
// so a worker could move main or plant a hook from inside it. Guard
// snapshots every ref outside the run's attempt branches, the shared HEAD,
// the config and the hooks before the worker runs; Restore puts back
// whatever changed and returns a *TamperError naming each change, or
// ErrBroken / ErrNotFound when the worktree lost its .git link or
// vanished. Confine returns how commands in a worktree run under
// internal/proc: the environment reduced to an allowlist with a private
// TMPDIR, GIT_CEILING_DIRECTORIES so that git never falls through to the
// user's repository, and a sandbox that may write only the worktree, its
// git metadata (objects, refs and logs, which commits need), the TMPDIR
// and the toolchains' caches.
//
// # Hygiene
//
// Remove deletes a worktree and its branch; an attempt commit that never
// reached main is kept at refs/taskloom/attempts/RUN/TASK/ATTEMPT, so work
// is never lost with its branch. Keep makes sure that ref exists (review
// shows it), and DropKept deletes a run's kept refs once the run ended. CleanOrphans removes what a crashed run
// left (worktrees, branches, stray folders), sparing what the caller still
// needs.
//
// BenchmarkWorktree compares create + commit + integrate with the raw git
// commands for the same work.
package worktree
