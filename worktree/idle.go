package worktree

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/internal/safefile"
)

// A new worktree costs `git worktree add`: three git processes and a
// checkout of the whole tree, which grows with the repository. So Remove
// parks a healthy worktree instead of deleting it: detached, its branch
// deleted, renamed to .taskloom/worktrees/_idle-N. Create takes a parked
// one back: it renames it to the attempt's folder, deletes every file its
// index does not track (untracked and ignored files alike, as a new
// worktree has none), and checks the attempt's branch out with
// `git checkout -f -B`, which writes only the files that differ. The
// worker sees the same full tree as in a new worktree. ReleaseIdle deletes
// the parked worktrees when a run stops.

// maxIdle bounds the parked worktrees: one per parallel worker and the
// build's, with room to spare.
const maxIdle = 8

// idlePrefix names parked worktree folders. Run IDs start with a letter or
// a digit, so no attempt's folder starts with it.
const idlePrefix = "_idle-"

// keptAdminFiles are the files of a worktree's admin folder that a parked
// worktree keeps: git's link to it, its HEAD and its index. Whatever else
// an attempt left there (a merge or revert in progress, its temp dir, a
// stale lock) goes.
var keptAdminFiles = map[string]bool{"commondir": true, "gitdir": true, "HEAD": true, "index": true}

// park takes w's worktree out of use and keeps it for reuse, detached at
// sha. It returns false, having changed nothing that matters, when the
// worktree cannot be parked: Remove then deletes it. The caller holds
// adminMu.
func (m *Manager) park(ctx context.Context, w *Worktree, sha string) bool {
	gitDir, err := m.adminDir(w.Path)
	if err != nil {
		return false
	}
	// The admin folder must be w's own: a worker may have pointed .git at
	// another attempt's.
	if link, err := safefile.ReadTarget(filepath.Join(gitDir, "gitdir"), 0); err != nil ||
		filepath.Clean(strings.TrimSpace(string(link))) != filepath.Join(w.Path, ".git") {
		return false
	}
	if _, err := os.Lstat(filepath.Join(gitDir, "locked")); err == nil {
		return false
	}
	if len(m.idle) >= maxIdle {
		return false
	}
	entries, err := os.ReadDir(gitDir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !keptAdminFiles[e.Name()] {
			if err := os.RemoveAll(filepath.Join(gitDir, e.Name())); err != nil {
				return false
			}
		}
	}
	if err := writeFileAtomic(filepath.Join(gitDir, "HEAD"), sha+"\n"); err != nil {
		return false
	}
	m.idleSeq++
	path := filepath.Join(m.dir, fmt.Sprintf("%s%d-%d", idlePrefix, os.Getpid(), m.idleSeq))
	if err := os.Rename(w.Path, path); err != nil {
		return false
	}
	if err := writeFileAtomic(filepath.Join(gitDir, "gitdir"), filepath.Join(path, ".git")+"\n"); err != nil {
		m.discard(ctx, path)
		return true // its folder is gone from w.Path all the same
	}
	m.idle = append(m.idle, path)
	m.logger.DebugContext(ctx, "worktree parked", slog.String("attempt", w.ID()), slog.String("path", path))
	return true
}

// reuse makes w from a parked worktree, if there is one that works, and
// reports whether it did. On false, nothing of w exists.
func (m *Manager) reuse(ctx context.Context, w *Worktree) bool {
	for {
		m.adminMu.Lock()
		if len(m.idle) == 0 {
			m.adminMu.Unlock()
			return false
		}
		path := m.idle[len(m.idle)-1]
		m.idle = m.idle[:len(m.idle)-1]
		// Another process may have taken it first: the rename decides.
		err := os.Rename(path, w.Path)
		m.adminMu.Unlock()
		if err != nil {
			continue
		}
		if err := m.refill(ctx, w); err != nil {
			m.logger.WarnContext(ctx, "parked worktree not reusable; deleting it",
				slog.String("attempt", w.ID()), slog.Any("error", err))
			m.adminMu.Lock()
			m.discard(ctx, w.Path)
			m.adminMu.Unlock()
			if m.branchExists(ctx, w.Branch) {
				_ = m.deleteBranch(ctx, w.Branch, "")
			}
			continue
		}
		return true
	}
}

// refill points a parked worktree, now at w.Path, at w's new branch.
func (m *Manager) refill(ctx context.Context, w *Worktree) error {
	// Its metadata still names where it was parked, until just below.
	gitDir, err := m.adminDirOf(w.Path, false)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(gitDir, "gitdir"), filepath.Join(w.Path, ".git")+"\n"); err != nil {
		return err
	}
	if err := removeUntracked(w.Path, filepath.Join(gitDir, "index")); err != nil {
		return err
	}
	if _, err := m.git(ctx, w.Path, "-c", "core.logAllRefUpdates=true", "checkout", "-q", "-f", "--no-recurse-submodules", "-B", w.Branch, w.Base); err != nil {
		return err
	}
	// Nothing of the attempt that used the worktree before stays in it:
	// its HEAD's reflog would take "git checkout -" (@{-1}) to that
	// attempt's commit, another task's work.
	for _, f := range []string{"logs/HEAD", "ORIG_HEAD", "FETCH_HEAD"} {
		if err := os.Remove(filepath.Join(gitDir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// discard deletes a worktree taskloom made, and git's record of it. The
// caller holds adminMu.
func (m *Manager) discard(ctx context.Context, path string) {
	gitDir, err := m.adminDir(path)
	if rerr := os.RemoveAll(path); rerr != nil {
		m.logger.WarnContext(ctx, "delete worktree", slog.String("path", path), slog.Any("error", rerr))
		return
	}
	if err == nil {
		_ = os.RemoveAll(gitDir)
	}
}

// ReleaseIdle deletes the worktrees Remove parked for reuse. Call it when
// a run stops, so that only the main checkout is left.
func (m *Manager) ReleaseIdle(ctx context.Context) {
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	for _, path := range m.idle {
		m.discard(ctx, path)
	}
	m.idle = nil
}

// removeUntracked deletes every file and folder under dir, other than its
// .git, that the index at indexPath does not track, without following
// symlinks. A submodule's folder is left as it is.
func removeUntracked(dir, indexPath string) error {
	return walkUntracked(dir, indexPath, func(path, _ string) error { return os.RemoveAll(path) })
}

// walkUntracked calls fn for each file and folder under dir, other than
// its .git, that the index at indexPath does not track, with its path and
// its slash-separated path relative to dir; it does not go into a folder
// it names, nor follow symlinks. A submodule's folder is left out.
func walkUntracked(dir, indexPath string, fn func(path, rel string) error) error {
	entries, err := readIndexNames(indexPath)
	if err != nil {
		return err
	}
	files := make(map[string]bool, len(entries))
	dirs := map[string]bool{}       // folders that hold tracked files
	submodules := map[string]bool{} // kept whole
	for _, e := range entries {
		name := filepath.FromSlash(e.name)
		if e.submodule {
			submodules[name] = true
		} else {
			files[name] = true
		}
		for d := filepath.Dir(name); d != "." && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case rel == ".":
			return nil
		case rel == ".git":
			return skip(d)
		case submodules[rel]:
			return skip(d)
		case d.IsDir() && dirs[rel]:
			return nil
		case !d.IsDir() && files[rel]:
			return nil
		}
		if err := fn(path, filepath.ToSlash(rel)); err != nil {
			return err
		}
		return skip(d)
	})
}

// harmlessCache names the folders that tests leave behind and that cannot
// make them pass: Python rebuilds its bytecode from the sources (and never
// imports a cached module whose source is gone), and pytest's cache only
// orders the tests.
var harmlessCache = map[string]bool{"__pycache__": true, ".pytest_cache": true}

// holdsNothing reports whether path is a harmless cache, or a folder with
// no file under it but in harmless caches. Git tracks no folders: an empty
// one is left out of every commit without being ignored, and a checkout
// misses nothing for it.
func holdsNothing(path string) bool {
	nothing := true
	err := filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || !d.IsDir():
			nothing = false
			return filepath.SkipAll
		case harmlessCache[d.Name()]:
			return filepath.SkipDir
		}
		return nil
	})
	return err == nil && nothing
}

// Ignored lists what w's folder holds beyond its index, other than the
// Include files, empty folders and harmless caches: after Commit, the
// files and folders git ignores that the attempt left there. Tests that
// pass in the folder may need them, and a checkout of the attempt's
// commit does not have them.
func (m *Manager) Ignored(ctx context.Context, w *Worktree) ([]string, error) {
	gitDir, err := m.adminDir(w.Path)
	if err != nil {
		return nil, fmt.Errorf("list the ignored files of %s: %w", w.ID(), err)
	}
	included, err := m.untrackedIncludes(ctx, w.Path, true)
	if err != nil {
		return nil, fmt.Errorf("list the ignored files of %s: %w", w.ID(), err)
	}
	var out []string
	err = walkUntracked(w.Path, filepath.Join(gitDir, "index"), func(path, rel string) error {
		// A folder that holds Include files counts whole: whatever else is
		// in it is not looked at.
		if slices.Contains(included, rel) || holdsNothing(path) {
			return nil
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the ignored files of %s: %w", w.ID(), err)
	}
	return out, nil
}

// skip is what WalkDir's callback returns to go past d.
func skip(d fs.DirEntry) error {
	if d.IsDir() {
		return filepath.SkipDir
	}
	return nil
}

// deleteBranch deletes an attempt's branch and its reflog, when it still
// points at sha ("" for any commit). It takes the ref's lock as git does;
// a packed ref, or a lock it cannot take, is left to `git update-ref -d`.
func (m *Manager) deleteBranch(ctx context.Context, branch, sha string) error {
	ref := "refs/heads/" + branch
	path := filepath.Join(m.commonDir, filepath.FromSlash(ref))
	byGit := func() error {
		args := []string{"update-ref", "-d", ref}
		if sha != "" {
			args = append(args, sha)
		}
		_, err := m.git(ctx, m.root, args...)
		return err
	}
	if _, err := packedRef(m.commonDir, ref); !errors.Is(err, errNoRef) {
		return byGit()
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return byGit()
	}
	lock.Close()
	err = m.deleteLockedRef(ref, path, sha)
	// The lock goes before the folders are pruned: it sits in the ref's
	// folder, which would never be empty otherwise.
	if rerr := os.Remove(path + ".lock"); err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	// As git does, drop the folders the ref leaves empty. Left behind, one
	// per task, they would slow every later listing of refs, git's and ours.
	for _, top := range []string{filepath.Join(m.commonDir, "refs", "heads"), filepath.Join(m.commonDir, "logs", "refs", "heads")} {
		for d := filepath.Dir(filepath.Join(top, filepath.FromSlash(branch))); d != top && strings.HasPrefix(d, top); d = filepath.Dir(d) {
			if os.Remove(d) != nil {
				break
			}
		}
	}
	return nil
}

// deleteLockedRef deletes the loose ref at path and its reflog, when it
// points at sha ("" for any commit). The caller holds the ref's lock.
func (m *Manager) deleteLockedRef(ref, path, sha string) error {
	data, err := safefile.ReadTarget(path, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if cur := strings.TrimSpace(string(data)); sha != "" && cur != sha {
		return fmt.Errorf("%s moved to %s, not at %s", ref, shortSHA(cur), shortSHA(sha))
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	logPath := filepath.Join(m.commonDir, "logs", filepath.FromSlash(ref))
	if err := os.Remove(logPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// writeFileAtomic replaces path with data.
func writeFileAtomic(path, data string) error {
	tmp := path + ".taskloom-tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
