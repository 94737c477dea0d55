package worktree

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
)

// Outcome says what Integrate did.
type Outcome string

// Outcomes of Integrate.
const (
	// Integrated: main now carries the attempt's commit.
	Integrated Outcome = "integrated"
	// AlreadyIntegrated: main's history already had the attempt's trailer;
	// nothing changed.
	AlreadyIntegrated Outcome = "already_integrated"
	// NothingToIntegrate: the attempt has no commit (the worker changed
	// nothing); nothing changed.
	NothingToIntegrate Outcome = "nothing_to_integrate"
)

// Result reports one integration.
type Result struct {
	Outcome Outcome
	// Commit is main's commit that carries the attempt (for Integrated and
	// AlreadyIntegrated).
	Commit string
	// Main is main's head after the call.
	Main string
	// FastForward is true when the attempt's own commit became main's head
	// because main had not moved since the attempt started.
	FastForward bool
}

// ConflictError says that an attempt conflicts with main. Main was not
// changed.
type ConflictError struct {
	Attempt string   // RUN/TASK/ATTEMPT
	Files   []string // the conflicting paths, sorted
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("integrate %s: conflicts with main in %s", e.Attempt, shortList(e.Files))
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// maxRaces bounds how often Integrate starts over because main moved
// while it worked.
const maxRaces = 10

// How long Integrate waits for a git lock in the way of moving main, and
// how often it looks.
var (
	lockWait = time.Minute
	lockPoll = 500 * time.Millisecond
)

// LockError is a git lock file in the way: git refuses to change the
// repository while it is there.
type LockError struct {
	Path string
}

func (e *LockError) Error() string {
	return fmt.Sprintf("git's lock file %s is in place: a git command is running in the repository, or one was killed before it could remove it; if none is running, delete the file", e.Path)
}

var lockExists = regexp.MustCompile(`Unable to create '([^']+\.lock)': File exists`)

// lockOf returns the lock named in git's error, or nil.
func lockOf(err error) *LockError {
	if m := lockExists.FindStringSubmatch(err.Error()); m != nil {
		return &LockError{Path: m[1]}
	}
	return nil
}

// moveTimeout bounds moving main, which runs on when taskloom is stopped:
// a checkout of a large task's files takes seconds, not minutes.
const moveTimeout = 10 * time.Minute

// Integrate brings a committed attempt onto main, exactly once.
//
// It first looks for the attempt's trailer in main's history and returns
// AlreadyIntegrated when it is there. Otherwise it computes the result with
// `git merge-tree --write-tree`, which touches no working tree and no ref: a
// conflict returns a *ConflictError and main is left as it was. The new
// commit is a cherry-pick of the attempt's commit, made with
// `git commit-tree` (or the attempt's commit itself when main has not moved
// since the attempt started). Main then moves to it by compare-and-swap:
// `git update-ref` when main is checked out nowhere, `git merge --ff-only`
// in the worktree that has it checked out otherwise, so that checkout's
// files follow. If main moved meanwhile (another process), Integrate starts
// over. If a git lock file is in the way (a git command of the user's, or
// one killed), it waits for it up to a minute, then returns a *LockError
// and main is unchanged. If that checkout has local changes in the way, it returns a
// *DirtyError and main is unchanged. If main no longer contains the commit
// the attempt started from (it was reset or rewritten), it returns a
// *ResetError and main is unchanged.
//
// Calls are serialized within the Manager by a mutex and across processes
// by an flock on <git common dir>/taskloom-integrate.lock, which the kernel
// releases if its holder dies.
func (m *Manager) Integrate(ctx context.Context, w *Worktree) (Result, error) {
	m.integrateMu.Lock()
	defer m.integrateMu.Unlock()
	unlock, err := lockFile(ctx, filepath.Join(m.commonDir, "taskloom-integrate.lock"))
	if err != nil {
		return Result{}, fmt.Errorf("integrate %s: %w", w.ID(), err)
	}
	defer unlock()
	var lockedSince time.Time
	for try := 1; try <= maxRaces; {
		res, raced, err := m.integrateOnce(ctx, w)
		var lock *LockError
		if errors.As(err, &lock) {
			// A git command of the user's holds the lock, for as long
			// as a commit's editor is open, or one was killed.
			if lockedSince.IsZero() {
				lockedSince = time.Now()
				m.logger.InfoContext(ctx, "git's lock is in place; waiting for it", slog.String("attempt", w.ID()), slog.String("lock", lock.Path))
			}
			if time.Since(lockedSince) >= lockWait {
				return res, err
			}
			t := time.NewTimer(lockPoll)
			select {
			case <-ctx.Done():
				t.Stop()
				return Result{}, fmt.Errorf("integrate %s: %w", w.ID(), ctx.Err())
			case <-t.C:
			}
			continue
		}
		if err != nil || !raced {
			return res, err
		}
		m.logger.InfoContext(ctx, "main moved during integration, starting over",
			slog.String("attempt", w.ID()), slog.Int("try", try))
		t := time.NewTimer(time.Duration(try) * 10 * time.Millisecond)
		try++
		select {
		case <-ctx.Done():
			t.Stop()
			return Result{}, fmt.Errorf("integrate %s: %w", w.ID(), ctx.Err())
		case <-t.C:
		}
	}
	return Result{}, fmt.Errorf("integrate %s: main kept moving under %d tries", w.ID(), maxRaces)
}

func (m *Manager) integrateOnce(ctx context.Context, w *Worktree) (res Result, raced bool, err error) {
	old, err := m.Head(ctx)
	if err != nil {
		return Result{}, false, fmt.Errorf("integrate %s: %w", w.ID(), err)
	}
	if sha, ok, err := m.findIntegrated(ctx, old, w.ID()); err != nil {
		return Result{}, false, fmt.Errorf("integrate %s: %w", w.ID(), err)
	} else if ok {
		m.logger.InfoContext(ctx, "attempt already integrated", slog.String("attempt", w.ID()), slog.String("commit", sha))
		return Result{Outcome: AlreadyIntegrated, Commit: sha, Main: old}, false, nil
	}
	tip, err := m.branchTip(ctx, w)
	if err != nil {
		return Result{}, false, fmt.Errorf("integrate %s: %w", w.ID(), err)
	}
	if !tip.committed {
		if ok, err := m.objects.isAncestor(tip.sha, old); err != nil || !ok {
			return Result{}, false, fmt.Errorf("integrate %s: the branch has changes that Commit did not make: commit them first", w.ID())
		}
		return Result{Outcome: NothingToIntegrate, Main: old}, false, nil
	}

	// The attempt's commit sits on the main commit it started from. When
	// main no longer contains that commit, main was reset or rewritten
	// under the attempt: cherry-picking would bring back what the user
	// dropped, or drop what the attempt built on.
	if err := m.checkContains(ctx, w.Run, tip.parent, old); err != nil {
		return Result{}, false, err
	}
	next, ff := tip.sha, tip.parent == old
	if !ff {
		tree, err := m.mergeTree(ctx, w, old, tip)
		if err != nil {
			return Result{}, false, err
		}
		next, err = m.commitTree(ctx, tree, old, tip)
		if err != nil {
			return Result{}, false, fmt.Errorf("integrate %s: %w", w.ID(), err)
		}
	}
	raced, err = m.advanceMain(ctx, w, old, next)
	if err != nil || raced {
		return Result{}, raced, err
	}
	m.integrated[w.ID()] = next
	m.scanned = next
	m.logger.InfoContext(ctx, "attempt integrated", slog.String("attempt", w.ID()),
		slog.String("commit", next), slog.Bool("fast_forward", ff))
	return Result{Outcome: Integrated, Commit: next, Main: next, FastForward: ff}, false, nil
}

// mergeTree cherry-picks tip onto main's head old in memory and returns the
// resulting tree, or a *ConflictError.
func (m *Manager) mergeTree(ctx context.Context, w *Worktree, old string, tip branchTip) (string, error) {
	args := []string{"merge-tree", "--write-tree", "-z", "--name-only", "--no-messages"}
	if m.mergeBase {
		// Without --merge-base (git < 2.40) git merges from the common
		// ancestor, which is the attempt's start: integrateOnce checked
		// that main still has it.
		args = append(args, "--merge-base="+tip.parent)
	}
	args = append(args, old, tip.sha)
	out, err := m.run(ctx, gitCmd{dir: m.root, args: args})
	fields := splitZ(out)
	switch {
	case err == nil && len(fields) > 0:
		return fields[0], nil
	case exitCode(err) == 1 && len(fields) > 0:
		files := slices.Compact(slices.Sorted(slices.Values(fields[1:])))
		m.logger.InfoContext(ctx, "attempt conflicts with main", slog.String("attempt", w.ID()),
			slog.Any("files", files))
		return "", &ConflictError{Attempt: w.ID(), Files: files}
	case err == nil:
		err = errors.New("no tree in merge-tree output")
	}
	return "", fmt.Errorf("integrate %s: %w", w.ID(), err)
}

// commitTree makes the cherry-picked commit: tree on top of parent, with
// tip's message and author, and taskloom as committer. It is unsigned.
func (m *Manager) commitTree(_ context.Context, tree, parent string, tip branchTip) (string, error) {
	return m.objects.writeCommit(tree, parent, tip.author, m.committer(), tip.message)
}

// advanceMain moves main from old to next, which descends from old. raced
// is true when main was no longer at old.
func (m *Manager) advanceMain(ctx context.Context, w *Worktree, old, next string) (raced bool, err error) {
	checkout, err := m.mainCheckout(ctx)
	if err != nil {
		return false, fmt.Errorf("integrate %s: %w", w.ID(), err)
	}
	// Either command, once started, runs to its end whatever happens to
	// taskloom: cut short, it would leave git's locks in the repository
	// and, in a checkout, the files of the task half written.
	move := gitCmd{dir: m.root, args: []string{"update-ref", "-m", "taskloom: integrate " + w.ID(), m.mainRef, next, old}, outlive: true, timeout: moveTimeout}
	if checkout != "" {
		// Git takes ignored files for expendable: a commit that adds one
		// would write over the user's own (.env, a local config), which
		// is refused instead, naming it, as an untracked file is.
		move = gitCmd{dir: checkout, args: []string{"-c", "gc.auto=0", "-c", "maintenance.auto=false", "merge", "-q", "--ff-only", "--no-overwrite-ignore", "--no-stat", next}, outlive: true, timeout: moveTimeout}
	}
	_, moveErr := m.run(ctx, move)
	if moveErr == nil {
		return false, nil
	}
	now, err := m.Head(ctx)
	if err != nil {
		return false, fmt.Errorf("integrate %s: %w", w.ID(), err)
	}
	if now != old {
		return true, nil // another process moved main
	}
	if lock := lockOf(moveErr); lock != nil {
		return false, fmt.Errorf("integrate %s: %w", w.ID(), lock)
	}
	if checkout != "" {
		return false, fmt.Errorf("integrate %s: %w", w.ID(), dirtyError(checkout, m.mainBranch, moveErr))
	}
	return false, fmt.Errorf("integrate %s: %w", w.ID(), moveErr)
}

// branchTip describes the head of an attempt's branch.
type branchTip struct {
	sha, parent string
	// committed: the head is the attempt's own commit (it carries the
	// attempt's trailer and has one parent).
	committed bool
	author    object.Signature
	message   string
}

func (m *Manager) branchTip(_ context.Context, w *Worktree) (branchTip, error) {
	sha, err := readRef(m.commonDir, "refs/heads/"+w.Branch)
	if errors.Is(err, errNoRef) {
		return branchTip{}, fmt.Errorf("branch %s: %w", w.Branch, ErrNotFound)
	}
	if err != nil {
		return branchTip{}, err
	}
	c, err := m.objects.commit(sha)
	if err != nil {
		return branchTip{}, fmt.Errorf("branch %s: %w", w.Branch, err)
	}
	t := branchTip{sha: c.sha, author: c.author, message: c.message}
	if len(c.parents) == 1 {
		t.parent = c.parents[0]
		t.committed = slices.Contains(trailerValues(c.message, TrailerKey), w.ID())
	}
	return t, nil
}

// scanLimit bounds how many commits findIntegrated reads through go-git
// before it asks git, which walks long histories faster.
const scanLimit = 1000

// findIntegrated looks for the attempt's trailer in the history of main's
// head. It walks main's whole history once per Manager, then only what is
// new. The caller holds integrateMu.
func (m *Manager) findIntegrated(ctx context.Context, head, id string) (string, bool, error) {
	if sha, ok := m.integrated[id]; ok {
		// Main may have been reset since: check it still has the commit.
		if ok, err := m.objects.isAncestor(sha, head); err == nil && ok {
			return sha, true, nil
		}
		delete(m.integrated, id)
	}
	if head == m.scanned {
		return "", false, nil
	}
	if m.scanned != "" {
		// What is new since the last scan, usually a commit or two: read
		// it here rather than start git.
		var found [][2]string
		n := 0
		err := m.objects.walk(head, func(sha string) bool { return sha == m.scanned }, func(c commitInfo) error {
			if n++; n > scanLimit {
				return errTooLong
			}
			for _, v := range trailerValues(c.message, TrailerKey) {
				found = append(found, [2]string{v, c.sha})
			}
			return nil
		})
		if err == nil {
			for _, f := range found {
				if _, seen := m.integrated[f[0]]; !seen {
					m.integrated[f[0]] = f[1]
				}
			}
			m.scanned = head
			sha, ok := m.integrated[id]
			return sha, ok, nil
		}
	}
	rng := head
	if m.scanned != "" {
		rng = m.scanned + ".." + head
	}
	out, err := m.git(ctx, m.root, "log", "--fixed-strings", "--grep="+TrailerKey+":",
		"--format=%H%x00%(trailers:key="+TrailerKey+",valueonly,separator=%x00)%x01", rng, "--")
	if err != nil && m.scanned != "" {
		m.scanned = "" // the last scanned head may be gone: walk it all
		return m.findIntegrated(ctx, head, id)
	}
	if err != nil {
		return "", false, err
	}
	for rec := range strings.SplitSeq(out, "\x01") {
		f := strings.Split(strings.TrimSpace(rec), "\x00")
		for _, v := range f[1:] {
			if v = strings.TrimSpace(v); v != "" {
				if _, seen := m.integrated[v]; !seen {
					m.integrated[v] = f[0]
				}
			}
		}
	}
	m.scanned = head
	sha, ok := m.integrated[id]
	return sha, ok, nil
}

var errTooLong = errors.New("history too long to walk here")

// Integration is the outcome of one attempt in IntegrateAll.
type Integration struct {
	Worktree *Worktree
	Result   Result
	Err      error
}

// IntegrateAll integrates several finished attempts one after the other, in
// a deterministic order whatever order they finished in: by the position of
// their task in taskOrder (the caller's selection order), tasks not listed
// last, then by task ID, run and attempt. A conflict or error on one
// attempt does not stop the others. The results come in integration order.
func (m *Manager) IntegrateAll(ctx context.Context, ws []*Worktree, taskOrder []string) []Integration {
	pos := make(map[string]int, len(taskOrder))
	for i, id := range taskOrder {
		if _, dup := pos[id]; !dup {
			pos[id] = i
		}
	}
	rank := func(w *Worktree) int {
		if p, ok := pos[w.TaskID]; ok {
			return p
		}
		return len(taskOrder)
	}
	sorted := slices.Clone(ws)
	slices.SortStableFunc(sorted, func(a, b *Worktree) int {
		return cmp.Or(
			cmp.Compare(rank(a), rank(b)),
			strings.Compare(a.TaskID, b.TaskID),
			strings.Compare(a.Run, b.Run),
			cmp.Compare(a.Attempt, b.Attempt),
		)
	})
	out := make([]Integration, len(sorted))
	for i, w := range sorted {
		res, err := m.Integrate(ctx, w)
		out[i] = Integration{Worktree: w, Result: res, Err: err}
	}
	return out
}

// dirtyError explains a refused fast-forward of main's checkout, with the
// files git listed.
func dirtyError(checkout, branch string, err error) *DirtyError {
	e := &DirtyError{Path: checkout, Branch: branch}
	msg := err.Error()
	var ge *gitError
	if errors.As(err, &ge) {
		msg = ge.stderr
	}
	for line := range strings.SplitSeq(msg, "\n") {
		switch {
		case strings.HasPrefix(line, "\t"):
			e.Files = append(e.Files, strings.TrimSpace(line))
		case e.Detail == "" && strings.TrimSpace(line) != "":
			e.Detail = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "error: "), ":")
		}
	}
	return e
}
