package worktree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// ErrLive: another process drives a run on the same target branch (see
// *LiveError).
var ErrLive = errors.New("a run is live on the branch")

// LiveError says that a process drives run Run on the target branch.
type LiveError struct {
	Run    string
	Branch string
	PID    int
	Host   string
}

func (e *LiveError) Error() string {
	run := "another run"
	if e.Run != "" {
		run = "run " + e.Run
	}
	return fmt.Sprintf("%s is live on %s (pid %d, host %s): wait for it or stop it", run, e.Branch, e.PID, e.Host)
}

// Is makes errors.Is(err, ErrLive) true.
func (e *LiveError) Is(target error) bool { return target == ErrLive }

// liveHolder is what the live lock's file says about its holder.
type liveHolder struct {
	Run  string `json:"run_id"`
	PID  int    `json:"pid"`
	Host string `json:"host"`
}

// LockBranch makes run the live run of the target branch until unlock is
// called or the process ends. While another process holds it, it returns a
// *LiveError naming that process's run.
//
// It is an flock on <git common dir>/taskloom-live-<branch>.lock, which
// every worktree of the repository shares, and which the kernel drops when
// its holder dies: a killed run never blocks the next one.
func (m *Manager) LockBranch(ctx context.Context, run string) (unlock func(), err error) {
	host, _ := os.Hostname()
	me, err := json.Marshal(liveHolder{Run: run, PID: os.Getpid(), Host: host})
	if err != nil {
		return nil, fmt.Errorf("lock branch %s: %w", m.mainBranch, err)
	}
	path := filepath.Join(m.commonDir, "taskloom-live-"+url.PathEscape(m.mainBranch)+".lock")
	for try := 0; ; try++ {
		unlock, held, ok, err := tryLockFile(path, me)
		if err != nil {
			return nil, fmt.Errorf("lock branch %s: %w", m.mainBranch, err)
		}
		if ok {
			return unlock, nil
		}
		var h liveHolder
		if json.Unmarshal(held, &h) == nil || try == 20 {
			return nil, &LiveError{Run: h.Run, Branch: m.mainBranch, PID: h.PID, Host: h.Host}
		}
		// The holder has the lock but has not written its name yet.
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("lock branch %s: %w", m.mainBranch, ctx.Err())
		case <-t.C:
		}
	}
}
