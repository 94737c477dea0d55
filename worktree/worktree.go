package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// TrailerKey is the commit trailer that names an attempt.
const TrailerKey = "Taskloom-Task"

// RevertsKey is the trailer of a revert commit that names each attempt
// it takes back out of the target branch, as "RUN/TASK/N".
const RevertsKey = "Taskloom-Reverts"

const (
	branchPrefix = "taskloom/"
	keptPrefix   = "refs/taskloom/attempts/"
)

// Worktree is the working copy of one task attempt.
type Worktree struct {
	Run     string
	TaskID  string
	Attempt int
	Path    string // <repo>/.taskloom/worktrees/<run>-<task>-<attempt>
	Branch  string // taskloom/<run>/<task>/<attempt>
	// Base is the main commit the attempt started from, when known. Commit
	// folds only the commits made on top of it, so that main's own commits
	// never ride along with the attempt's (main may have been reset since).
	Base string
}

// ID is the attempt's "RUN/TASK/ATTEMPT", the value of its trailer.
func (w *Worktree) ID() string { return fmt.Sprintf("%s/%s/%d", w.Run, w.TaskID, w.Attempt) }

// Name is the worktree's folder name, "<run>-<task>-<attempt>".
func (w *Worktree) Name() string { return fmt.Sprintf("%s-%s-%d", w.Run, w.TaskID, w.Attempt) }

// Trailer is the line "Taskloom-Task: RUN/TASK/ATTEMPT".
func (w *Worktree) Trailer() string { return TrailerKey + ": " + w.ID() }

// KeptRef is where Remove keeps the attempt's commit when it was never
// integrated: refs/taskloom/attempts/RUN/TASK/ATTEMPT.
func (w *Worktree) KeptRef() string { return keptPrefix + w.ID() }

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func validID(s string) bool {
	return idPattern.MatchString(s) && !strings.Contains(s, "..") && !strings.HasSuffix(s, ".lock")
}

func (m *Manager) worktree(run, taskID string, attempt int) (*Worktree, error) {
	if !validID(run) || !validID(taskID) || attempt < 1 {
		return nil, fmt.Errorf("worktree for run %q, task %q, attempt %d: run and task IDs must be letters, digits, '.', '_' or '-', and attempts start at 1", run, taskID, attempt)
	}
	w := &Worktree{Run: run, TaskID: taskID, Attempt: attempt}
	w.Path = filepath.Join(m.dir, w.Name())
	w.Branch = branchPrefix + w.ID()
	// Confine learns from this which branch a worktree's commands may
	// move; a worktree's own HEAD, which its worker controls, never says.
	m.branches.Store(w.Path, w.Branch)
	return w, nil
}

// Create makes the worktree of a task attempt: a new branch
// taskloom/<run>/<task>/<attempt> at main's head, checked out under
// <repo>/.taskloom/worktrees/, with the untracked files that match
// Opts.Include copied in. It fails with ErrExists when the attempt already
// has a worktree or a branch (use Get, or Remove it first).
func (m *Manager) Create(ctx context.Context, run, taskID string, attempt int) (*Worktree, error) {
	return m.CreateAt(ctx, run, taskID, attempt, "")
}

// CreateAt is Create with the attempt's branch made at base, a commit that
// must be in the repository, instead of main's head; "" means main's head.
// A worker on another machine starts from the commit the run chose.
func (m *Manager) CreateAt(ctx context.Context, run, taskID string, attempt int, base string) (*Worktree, error) {
	w, err := m.worktree(run, taskID, attempt)
	if err != nil {
		return nil, err
	}
	if base == "" {
		if base, err = m.Head(ctx); err != nil {
			return nil, fmt.Errorf("create worktree %s: %w", w.ID(), err)
		}
	}
	w.Base = base
	if _, statErr := os.Lstat(w.Path); statErr == nil || m.branchExists(ctx, w.Branch) {
		return nil, fmt.Errorf("create worktree %s: %w", w.ID(), ErrExists)
	}
	if !m.reuse(ctx, w) {
		// The branch is this attempt's alone and does not exist yet: a
		// lock on it is what a process killed while it added the
		// worktree left, and would stop every later try.
		_ = os.Remove(m.refLock(w.Branch))
		m.adminMu.Lock()
		if _, serr := os.Stat(filepath.Join(m.commonDir, "worktrees", filepath.Base(w.Path))); serr == nil {
			// git has a record of this worktree but not its folder: a
			// process killed while it added it left it, locked. Clear it.
			err = m.pruneIfNeeded(ctx)
		}
		if err == nil {
			// The branch's reflog keeps its creation point, where Get finds
			// the base again after a restart.
			m.addMu.Lock()
			_, err = m.git(ctx, m.root, "-c", "core.logAllRefUpdates=true", "worktree", "add", "-q", "-b", w.Branch, w.Path, base)
			m.addMu.Unlock()
		}
		m.adminMu.Unlock()
		if err != nil {
			if _, statErr := os.Stat(w.Path); statErr == nil || m.branchExists(ctx, w.Branch) {
				return nil, fmt.Errorf("create worktree %s: %w: %w", w.ID(), ErrExists, err)
			}
			return nil, fmt.Errorf("create worktree %s: %w", w.ID(), err)
		}
	}
	copied, err := m.copyIncludes(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("create worktree %s: %w", w.ID(), err)
	}
	m.logger.InfoContext(ctx, "worktree created", slog.String("attempt", w.ID()),
		slog.String("path", w.Path), slog.String("base", base), slog.Int("included_files", copied))
	return w, nil
}

// Get returns the existing worktree of an attempt, for example after a
// restart, or ErrNotFound.
func (m *Manager) Get(ctx context.Context, run, taskID string, attempt int) (*Worktree, error) {
	w, err := m.worktree(run, taskID, attempt)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(w.Path); err != nil || !m.branchExists(ctx, w.Branch) {
		return nil, fmt.Errorf("worktree %s: %w", w.ID(), ErrNotFound)
	}
	w.Base = m.branchBase(ctx, w.Branch)
	return w, nil
}

// branchBase returns the commit an attempt branch was created at: the
// oldest entry of its reflog, or "" when it has none.
func (m *Manager) branchBase(_ context.Context, branch string) string {
	return branchCreatedAt(m.commonDir, branch)
}

func (m *Manager) branchExists(_ context.Context, branch string) bool {
	_, err := readRef(m.commonDir, "refs/heads/"+branch)
	return err == nil
}

// includePathspecs turns the Include globs into pathspecs.
func (m *Manager) includePathspecs() []string {
	specs := make([]string, 0, len(m.include)+1)
	for _, g := range m.include {
		specs = append(specs, ":(glob)"+g)
	}
	return specs
}

// untrackedIncludes lists the untracked files under dir that match Include,
// relative to dir, with or without the ignored ones.
func (m *Manager) untrackedIncludes(ctx context.Context, dir string, ignored bool) ([]string, error) {
	if len(m.include) == 0 {
		return nil, nil
	}
	args := []string{"ls-files", "-z", "--others"}
	if !ignored {
		args = append(args, "--exclude-standard")
	}
	args = append(args, "--")
	args = append(args, m.includePathspecs()...)
	args = append(args, ":(exclude).taskloom")
	out, err := m.run(ctx, gitCmd{dir: dir, args: args})
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range splitZ(out) {
		if !strings.HasSuffix(f, "/") { // a nested repository
			files = append(files, f)
		}
	}
	return files, nil
}

// copyIncludes copies the repository folder's untracked Include files into
// the worktree, without overwriting anything there.
func (m *Manager) copyIncludes(ctx context.Context, w *Worktree) (int, error) {
	files, err := m.untrackedIncludes(ctx, m.root, true)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		src := filepath.Join(m.root, filepath.FromSlash(f))
		dst := filepath.Join(w.Path, filepath.FromSlash(f))
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := copyFile(src, dst); err != nil {
			return n, fmt.Errorf("copy %s: %w", f, err)
		}
		n++
	}
	return n, nil
}

func copyFile(src, dst string) error {
	info, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if info.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// List returns the attempt worktrees registered in the repository, sorted by
// run, task and attempt.
func (m *Manager) List(ctx context.Context) ([]*Worktree, error) {
	entries, err := m.worktrees(ctx)
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	var out []*Worktree
	for _, e := range entries {
		if w := m.parseBranch(strings.TrimPrefix(e.branch, "refs/heads/")); w != nil && w.Path == e.path {
			w.Base = m.branchBase(ctx, w.Branch)
			out = append(out, w)
		}
	}
	sortWorktrees(out)
	return out, nil
}

// parseBranch returns the attempt a taskloom/RUN/TASK/ATTEMPT branch names,
// or nil.
func (m *Manager) parseBranch(branch string) *Worktree {
	rest, ok := strings.CutPrefix(branch, branchPrefix)
	if !ok {
		return nil
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return nil
	}
	attempt, err := strconv.Atoi(parts[2])
	if err != nil {
		return nil
	}
	w, err := m.worktree(parts[0], parts[1], attempt)
	if err != nil {
		return nil
	}
	return w
}

func sortWorktrees(ws []*Worktree) {
	slices.SortFunc(ws, func(a, b *Worktree) int {
		if c := strings.Compare(a.Run, b.Run); c != 0 {
			return c
		}
		if c := strings.Compare(a.TaskID, b.TaskID); c != 0 {
			return c
		}
		return a.Attempt - b.Attempt
	})
}

// Remove deletes an attempt's worktree, with any uncommitted changes in it,
// and its branch. A commit on the branch that was never integrated is kept
// under KeptRef, so a finished attempt's work is never lost. Removing what is
// already gone is not an error.
func (m *Manager) Remove(ctx context.Context, w *Worktree) error {
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	return m.remove(ctx, w)
}

func (m *Manager) remove(ctx context.Context, w *Worktree) error {
	tip, err := m.branchTip(ctx, w)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("remove worktree %s: %w", w.ID(), err)
	}
	if err == nil && m.park(ctx, w, tip.sha) {
		return m.dropBranch(ctx, w, tip)
	}
	prune := true
	if _, err := os.Stat(w.Path); err == nil {
		_, err := m.git(ctx, m.root, "worktree", "remove", "--force", "--force", w.Path)
		prune = err != nil
		if err != nil {
			// Not (or no longer properly) registered: delete the folder,
			// which is ours, and let prune drop git's record of it.
			m.logger.WarnContext(ctx, "git worktree remove failed; deleting the folder",
				slog.String("attempt", w.ID()), slog.String("error", err.Error()))
			if err := os.RemoveAll(w.Path); err != nil {
				return fmt.Errorf("remove worktree %s: %w", w.ID(), err)
			}
		}
	}
	if prune {
		if err := m.pruneIfNeeded(ctx); err != nil {
			return fmt.Errorf("remove worktree %s: %w", w.ID(), err)
		}
	}
	tip, err = m.branchTip(ctx, w)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove worktree %s: %w", w.ID(), err)
	}
	return m.dropBranch(ctx, w, tip)
}

// dropBranch deletes an attempt's branch, whose worktree is gone, and
// keeps its commit under KeptRef when it was never integrated.
func (m *Manager) dropBranch(ctx context.Context, w *Worktree, tip branchTip) error {
	if tip.committed {
		integrated, err := m.isIntegrated(ctx, w)
		if err != nil {
			return fmt.Errorf("remove worktree %s: %w", w.ID(), err)
		}
		if !integrated {
			if _, err := m.git(ctx, m.root, "update-ref", w.KeptRef(), tip.sha); err != nil {
				return fmt.Errorf("remove worktree %s: keep its commit: %w", w.ID(), err)
			}
		}
	}
	if err := m.deleteBranch(ctx, w.Branch, tip.sha); err != nil {
		return fmt.Errorf("remove worktree %s: delete branch: %w", w.ID(), err)
	}
	m.logger.InfoContext(ctx, "worktree removed", slog.String("attempt", w.ID()), slog.Bool("committed", tip.committed))
	return nil
}

// pruneIfNeeded runs `git worktree prune` when git keeps the record of a
// worktree whose folder is gone.
func (m *Manager) pruneIfNeeded(ctx context.Context) error {
	list, err := m.worktrees(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(list, func(e worktreeEntry) bool { return e.prunable }) {
		return nil
	}
	for _, e := range list {
		if e.unlock != "" {
			if err := os.Remove(e.unlock); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("unlock the half-added worktree %s: %w", e.path, err)
			}
		}
	}
	_, err = m.git(ctx, m.root, "worktree", "prune")
	return err
}

func (m *Manager) isIntegrated(ctx context.Context, w *Worktree) (bool, error) {
	m.integrateMu.Lock()
	defer m.integrateMu.Unlock()
	head, err := m.Head(ctx)
	if err != nil {
		return false, err
	}
	_, ok, err := m.findIntegrated(ctx, head, w.ID())
	return ok, err
}

// CleanOrphans removes what a crashed run left behind: attempt worktrees,
// attempt branches without a worktree, and folders under
// .taskloom/worktrees that git does not know. keepFunc, when not nil,
// spares the attempts it returns true for (the ones a resumed run still
// uses). It returns the attempts it removed; their unintegrated commits are
// kept as Remove does.
func (m *Manager) CleanOrphans(ctx context.Context, keepFunc func(*Worktree) bool) ([]*Worktree, error) {
	m.adminMu.Lock()
	defer m.adminMu.Unlock()
	if err := m.pruneIfNeeded(ctx); err != nil {
		return nil, fmt.Errorf("clean orphans: %w", err)
	}
	branches, err := listRefs(m.commonDir, "refs/heads/"+branchPrefix, "")
	if err != nil {
		return nil, fmt.Errorf("clean orphans: %w", err)
	}
	var found []*Worktree
	for b := range branches {
		if w := m.parseBranch(strings.TrimPrefix(b, "refs/heads/")); w != nil {
			found = append(found, w)
		}
	}
	sortWorktrees(found)
	var removed []*Worktree
	known := make(map[string]bool)
	for _, w := range found {
		known[w.Name()] = true
		if keepFunc != nil && keepFunc(w) {
			continue
		}
		if err := m.remove(ctx, w); err != nil {
			return removed, fmt.Errorf("clean orphans: %w", err)
		}
		removed = append(removed, w)
	}
	// Folders that no attempt branch accounts for: a crash inside
	// `git worktree add`, or a branch deleted by hand.
	entries, err := os.ReadDir(m.dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return removed, fmt.Errorf("clean orphans: %w", err)
	}
	registered, err := m.worktrees(ctx)
	if err != nil {
		return removed, fmt.Errorf("clean orphans: %w", err)
	}
	for _, e := range entries {
		path := filepath.Join(m.dir, e.Name())
		if known[e.Name()] || slices.Contains(m.idle, path) {
			continue
		}
		if slices.ContainsFunc(registered, func(r worktreeEntry) bool { return r.path == path }) {
			_, err = m.git(ctx, m.root, "worktree", "remove", "--force", "--force", path)
		} else {
			err = os.RemoveAll(path)
		}
		if err != nil {
			return removed, fmt.Errorf("clean orphans: %w", err)
		}
		m.logger.InfoContext(ctx, "stray worktree folder removed", slog.String("path", path))
	}
	return removed, nil
}
