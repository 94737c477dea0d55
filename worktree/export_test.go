package worktree

import "time"

// SetLockWait shortens how long Integrate waits for a git lock, for a
// test; the returned func puts it back.
func SetLockWait(wait, poll time.Duration) func() {
	oldWait, oldPoll := lockWait, lockPoll
	lockWait, lockPoll = wait, poll
	return func() { lockWait, lockPoll = oldWait, oldPoll }
}
