//go:build !unix

package worktree

import "context"

// lockFile is a no-op where flock is missing: integration then relies on
// git's compare-and-swap ref updates alone.
func lockFile(context.Context, string) (func(), error) { return func() {}, nil }

// tryLockFile always succeeds where flock is missing: one live run per
// branch is then not enforced, and the run's lease still keeps two
// processes from driving the same run.
func tryLockFile(string, []byte) (func(), []byte, bool, error) { return func() {}, nil, true, nil }
