package worktree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/taskloom/taskloom/internal/proc"
)

// BaseRef is where a run publishes the commit an attempt starts from, on
// the remote that workers on other machines fetch from.
func BaseRef(run, taskID string, attempt int) string {
	return fmt.Sprintf("refs/taskloom/bases/%s/%s/%d", run, taskID, attempt)
}

// AttemptRef is refs/taskloom/attempts/RUN/TASK/ATTEMPT, where an attempt's
// commit is kept, locally and on the remote.
func AttemptRef(run, taskID string, attempt int) string {
	return fmt.Sprintf("%s%s/%s/%d", keptPrefix, run, taskID, attempt)
}

// HasRemote reports whether the repository has a remote of that name.
func (m *Manager) HasRemote(ctx context.Context, name string) bool {
	if name == "" {
		return false
	}
	_, err := m.git(ctx, m.root, "config", "--get", "remote."+name+".url")
	return err == nil
}

// HasRemoteIn reports whether the repository at dir has the named remote,
// without opening a Manager there.
func HasRemoteIn(ctx context.Context, dir, name string) bool {
	if name == "" {
		return false
	}
	res, err := proc.Run(ctx, proc.Cmd{Args: []string{"git", "config", "--get", "remote." + name + ".url"}, Dir: dir, Env: GitEnvAt(dir)})
	return err == nil && res.ExitCode == 0
}

// Push sets ref on the remote to the commit sha, whatever it was before:
// a retried attempt replaces what an abandoned one left there.
func (m *Manager) Push(ctx context.Context, remote, sha, ref string) error {
	if _, err := m.remoteGit(ctx, "push", "-q", "--no-verify", remote, "+"+sha+":"+ref); err != nil {
		return fmt.Errorf("push %s to %s: %w", ref, remote, err)
	}
	return nil
}

// Fetch brings the commit of ref on the remote into the repository for
// run and returns it. It goes through a scratch branch among the run's
// attempt branches, which the guards of the run's running attempts leave
// alone, and deletes it after: no ref of the repository moves.
func (m *Manager) Fetch(ctx context.Context, remote, ref, run string) (string, error) {
	if !validID(run) {
		return "", fmt.Errorf("fetch %s: %q is not a run ID", ref, run)
	}
	scratch := fmt.Sprintf("refs/heads/%s%s/fetch-%d-%d", branchPrefix, run, os.Getpid(), fetchSeq.Add(1))
	// A fetch reads every worktree's HEAD, and git worktree add writes a
	// placeholder there before the real one: "bad object worktrees/…/HEAD".
	m.addMu.RLock()
	_, err := m.remoteGit(ctx, "fetch", "-q", "--no-tags", "--no-write-fetch-head", remote, "+"+ref+":"+scratch)
	m.addMu.RUnlock()
	if err != nil {
		return "", fmt.Errorf("fetch %s from %s: %w", ref, remote, err)
	}
	sha, err := m.git(ctx, m.root, "rev-parse", "-q", "--verify", scratch+"^{commit}")
	if _, derr := m.git(ctx, m.root, "update-ref", "-d", scratch); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		return "", fmt.Errorf("fetch %s from %s: %w", ref, remote, err)
	}
	return strings.TrimSpace(sha), nil
}

// DropRemote deletes a run's base and attempt refs from the remote the
// run shared with its workers (refs/taskloom/bases/RUN/… and
// refs/taskloom/attempts/RUN/…): once the run ended, nothing fetches them.
// It returns how many it deleted.
func (m *Manager) DropRemote(ctx context.Context, remote, run string) (int, error) {
	if !validID(run) {
		return 0, fmt.Errorf("drop the remote refs of run %q: not a run ID", run)
	}
	out, err := m.remoteGit(ctx, "ls-remote", "--refs", remote, "refs/taskloom/bases/"+run+"/*", keptPrefix+run+"/*")
	if err != nil {
		return 0, fmt.Errorf("list the refs of run %s on %s: %w", run, remote, err)
	}
	args := []string{"push", "-q", "--no-verify", remote}
	for line := range strings.SplitSeq(out, "\n") {
		if _, ref, ok := strings.Cut(strings.TrimSpace(line), "\t"); ok {
			args = append(args, ":"+ref)
		}
	}
	n := len(args) - 4
	if n == 0 {
		return 0, nil
	}
	if _, err := m.remoteGit(ctx, args...); err != nil {
		return 0, fmt.Errorf("delete the refs of run %s on %s: %w", run, remote, err)
	}
	return n, nil
}

// RemoteHas reports whether ref is on remote. An error says the remote
// did not answer.
func (m *Manager) RemoteHas(ctx context.Context, remote, ref string) (bool, error) {
	out, err := m.remoteGit(ctx, "ls-remote", "--refs", remote, ref)
	if err != nil {
		return false, fmt.Errorf("list %s on %s: %w", ref, remote, err)
	}
	return strings.TrimSpace(out) != "", nil
}

// fetchSeq numbers scratch branches; with the process ID it keeps them
// apart across processes sharing a repository.
var fetchSeq atomic.Int64

// HasCommit reports whether sha names a commit in the repository.
func (m *Manager) HasCommit(ctx context.Context, sha string) bool {
	_, err := m.git(ctx, m.root, "cat-file", "-e", sha+"^{commit}")
	return err == nil
}

// Project names the repository's history by the first commit of the
// target branch, along its first parents: every clone of it shares that
// commit whatever its remotes are called, however far behind it is, and
// a history merged in later (a second parent) does not change it. It is
// "" when this clone cannot tell (a shallow one, whose oldest commit is a
// cut).
func (m *Manager) Project(ctx context.Context) string {
	if _, err := os.Stat(filepath.Join(m.commonDir, "shallow")); err == nil {
		return ""
	}
	out, err := m.git(ctx, m.root, "rev-list", "--first-parent", "--max-parents=0", m.mainRef)
	if err != nil {
		return ""
	}
	roots := strings.Fields(out)
	if len(roots) == 0 {
		return ""
	}
	return roots[len(roots)-1]
}

// SameProject reports whether project (Project of another clone) may be
// this repository's: its commit is here, or one of them cannot tell.
func (m *Manager) SameProject(ctx context.Context, project string) bool {
	if project == "" {
		return true
	}
	if _, err := os.Stat(filepath.Join(m.commonDir, "shallow")); err == nil {
		return true
	}
	return m.HasCommit(ctx, project)
}

// Adopt points a fresh attempt worktree, made at its base, at the commit a
// worker elsewhere made, so that the attempt is verified and integrated
// here as if it had run here.
func (m *Manager) Adopt(ctx context.Context, w *Worktree, sha string) error {
	if _, err := m.git(ctx, w.Path, "reset", "-q", "--hard", sha); err != nil {
		return fmt.Errorf("adopt %s into %s: %w", shortSHA(sha), w.ID(), err)
	}
	return nil
}
