package worktree

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/internal/safefile"
)

// ErrBroken: an attempt's worktree lost its .git link or its git metadata,
// so git commands there would not run against the attempt.
var ErrBroken = errors.New("worktree is broken")

// ErrTampered: a worker changed git state outside its attempt's branch
// (see *TamperError).
var ErrTampered = errors.New("git state changed outside the attempt")

// TamperError lists what a worker changed outside its attempt's branch.
// Guard.Restore has put all of it back.
type TamperError struct {
	Attempt string
	// Changed names each ref, config file or hook that changed, with how.
	Changed []string
}

func (e *TamperError) Error() string {
	return fmt.Sprintf("attempt %s changed git state outside its branch, which taskloom put back: %s",
		e.Attempt, strings.Join(e.Changed, "; "))
}

// Is makes errors.Is(err, ErrTampered) true.
func (e *TamperError) Is(target error) bool { return target == ErrTampered }

// Guard is a snapshot of the repository state a worker must leave alone:
// every ref except the attempt branches of its run (the attempts of a
// batch commit on theirs at the same time), the shared HEAD, the
// repository's config, its hooks, the files of its packs, and the loose
// objects it adds.
type Guard struct {
	w      *Worktree
	refs   map[string]string
	files  map[string]fileState // path relative to the common dir
	hooks  string               // the hooks folder
	branch string               // prefix of the run's attempt branches
	packs  map[string]packFile  // objects/pack
	loose  looseSnap            // the loose objects' folders
}

type fileState struct {
	data []byte
	mode fs.FileMode
	sum  [32]byte
}

// Guard takes the snapshot for attempt w. Take it before the worker runs,
// and call Restore after.
func (m *Manager) Guard(ctx context.Context, w *Worktree) (*Guard, error) {
	g := &Guard{w: w, hooks: filepath.Join(m.commonDir, "hooks"), branch: "refs/heads/" + branchPrefix + w.Run + "/"}
	var err error
	if g.refs, err = m.refSnapshot(ctx, g.branch); err != nil {
		return nil, fmt.Errorf("guard %s: %w", w.ID(), err)
	}
	if g.files, err = m.fileSnapshot(); err != nil {
		return nil, fmt.Errorf("guard %s: %w", w.ID(), err)
	}
	g.packs = m.packSnapshot()
	g.loose = m.looseSnapshot()
	return g, nil
}

func (m *Manager) refSnapshot(_ context.Context, skipPrefix string) (map[string]string, error) {
	refs, err := listRefs(m.commonDir, "refs/", skipPrefix)
	// What Restore keeps of the refs it put back is its own.
	maps.DeleteFunc(refs, func(name, _ string) bool { return strings.HasPrefix(name, displacedPrefix) })
	return refs, err
}

// workerWritable reports whether the sandbox lets a worker write rel, a
// guarded file under the common dir: of them, only the object store's.
func workerWritable(rel string) bool {
	return strings.HasPrefix(filepath.ToSlash(rel), "objects/")
}

// displacedPrefix is where Restore keeps the value of each ref it put back
// (refs/taskloom/displaced/RUN/TASK/ATTEMPT/<ref>): without the sandbox,
// the worker and the user cannot be told apart, and a branch the user
// made or moved meanwhile must not be lost.
const displacedPrefix = "refs/taskloom/displaced/"

// guardedFiles are the files under the common dir a worker must not
// change: the config (where a hooks path or an alias could be planted),
// the shared HEAD, every hook, and the object store's alternates, through
// which objects of the worker's making, anywhere, would be read as the
// repository's own.
func (m *Manager) guardedFiles() []string {
	files := []string{"config", "config.worktree", "HEAD", "info/exclude", "info/attributes",
		"objects/info/alternates", "objects/info/http-alternates"}
	entries, _ := os.ReadDir(filepath.Join(m.commonDir, "hooks"))
	for _, e := range entries {
		files = append(files, filepath.Join("hooks", e.Name()))
	}
	return files
}

func (m *Manager) fileSnapshot() (map[string]fileState, error) {
	snap := make(map[string]fileState)
	for _, rel := range m.guardedFiles() {
		path := filepath.Join(m.commonDir, rel)
		st, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			snap[rel] = fileState{mode: st.Mode()}
			continue
		}
		data, err := safefile.ReadTarget(path, 0)
		if err != nil {
			return nil, err
		}
		snap[rel] = fileState{data: data, mode: st.Mode(), sum: sha256.Sum256(data)}
	}
	return snap, nil
}

// Restore compares the repository with the snapshot and puts back every
// ref, config file and hook that changed. It returns a *TamperError naming
// them, or nil when nothing changed. It also checks the attempt's worktree:
// a worktree that vanished is ErrNotFound, one whose .git link or metadata
// is gone is ErrBroken.
func (m *Manager) Restore(ctx context.Context, g *Guard) error {
	var changed []string
	now, err := m.refSnapshot(ctx, g.branch)
	if err != nil {
		return fmt.Errorf("check refs of %s: %w", g.w.ID(), err)
	}
	if m.confinedRefs {
		// The worker could not have moved these: the user did. Leave
		// them; a reset target branch is the run's head check's to
		// report.
		if moved := refChanges(g.refs, now); len(moved) > 0 {
			m.logger.InfoContext(ctx, "refs changed during the attempt, not by its worker; left as they are",
				slog.String("attempt", g.w.ID()), slog.Any("changed", moved))
		}
		now = g.refs
	}
	var stdin strings.Builder
	kept := 0
	keep := func(name, cur string) {
		fmt.Fprintf(&stdin, "update %s%s/%s %s\n", displacedPrefix, g.w.ID(), name, cur)
		kept++
	}
	for _, name := range slices.Sorted(maps.Keys(g.refs)) {
		old := g.refs[name]
		switch cur, ok := now[name]; {
		case !ok:
			changed = append(changed, fmt.Sprintf("%s was deleted", name))
			fmt.Fprintf(&stdin, "create %s %s\n", name, old)
		case cur != old:
			changed = append(changed, fmt.Sprintf("%s was moved from %s to %s", name, shortSHA(old), shortSHA(cur)))
			fmt.Fprintf(&stdin, "update %s %s %s\n", name, old, cur)
			keep(name, cur)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(now)) {
		if _, ok := g.refs[name]; !ok {
			changed = append(changed, fmt.Sprintf("%s was created", name))
			fmt.Fprintf(&stdin, "delete %s %s\n", name, now[name])
			keep(name, now[name])
		}
	}
	if kept > 0 {
		changed = append(changed, fmt.Sprintf("(the values those refs had are kept under %s%s/: if you, not the worker, made those changes, take them back from there with git update-ref)", displacedPrefix, g.w.ID()))
	}
	var restoreErrs []error
	if stdin.Len() > 0 {
		if _, err := m.run(ctx, gitCmd{dir: m.root, args: []string{"update-ref", "--no-deref", "-m", "taskloom: put back what attempt " + g.w.ID() + " changed", "--stdin"}, stdin: stdin.String()}); err != nil {
			restoreErrs = append(restoreErrs, fmt.Errorf("put refs back: %w", err))
		}
	}
	files, err := m.fileSnapshot()
	if err != nil {
		return fmt.Errorf("check git files of %s: %w", g.w.ID(), err)
	}
	var users []string
	for _, rel := range slices.Sorted(maps.Keys(g.files)) {
		old, cur := g.files[rel], files[rel]
		if _, ok := files[rel]; ok && old.mode == cur.mode && old.sum == cur.sum {
			continue
		}
		if m.confinedRefs && !workerWritable(rel) {
			users = append(users, rel)
			continue
		}
		changed = append(changed, fmt.Sprintf("%s was changed", gitPathName(rel)))
		if err := restoreFile(filepath.Join(m.commonDir, rel), old); err != nil {
			restoreErrs = append(restoreErrs, err)
		}
	}
	for _, rel := range slices.Sorted(maps.Keys(files)) {
		if _, ok := g.files[rel]; !ok {
			if m.confinedRefs && !workerWritable(rel) {
				users = append(users, rel)
				continue
			}
			changed = append(changed, fmt.Sprintf("%s was created", gitPathName(rel)))
			if err := os.Remove(filepath.Join(m.commonDir, rel)); err != nil {
				restoreErrs = append(restoreErrs, err)
			}
		}
	}
	if len(users) > 0 {
		// The sandbox kept the worker out of these: the user changed
		// them (git config, a hook, a checkout in the main folder).
		m.logger.InfoContext(ctx, "git files changed during the attempt, not by its worker; left as they are",
			slog.String("attempt", g.w.ID()), slog.Any("changed", users))
	}
	mended, err := m.checkPacks(ctx, g.packs)
	changed = append(changed, mended...)
	if err != nil {
		restoreErrs = append(restoreErrs, err)
	}
	removed, err := m.checkLoose(g.loose)
	changed = append(changed, removed...)
	if err != nil {
		restoreErrs = append(restoreErrs, err)
	}
	gitDir, broken := m.adminDir(g.w.Path)
	if broken == nil {
		moved, err := m.restoreAdmin(g.w, gitDir)
		changed = append(changed, moved...)
		if err != nil {
			restoreErrs = append(restoreErrs, err)
		}
	}
	if len(restoreErrs) > 0 {
		return fmt.Errorf("attempt %s changed %s and taskloom could not put it back: %w",
			g.w.ID(), strings.Join(changed, "; "), errors.Join(restoreErrs...))
	}
	if len(changed) > 0 {
		m.logger.WarnContext(ctx, "attempt changed git state outside its branch; put back",
			slog.String("attempt", g.w.ID()), slog.Any("changed", changed))
		return &TamperError{Attempt: g.w.ID(), Changed: changed}
	}
	return broken
}

// restoreAdmin checks the two files of the attempt's own git metadata
// folder that taskloom's commands in the worktree trust, and puts back
// whichever changed: HEAD must name the attempt's branch, and commondir the
// repository's git dir. The worker can write that folder, since its own
// commits need it; so it could point HEAD at main, which taskloom's commit
// of the attempt would then move, or detach it or point commondir at
// another repository, where the attempt's commit would be lost and the
// task read as one that changed nothing.
func (m *Manager) restoreAdmin(w *Worktree, gitDir string) (changed []string, err error) {
	want := "ref: refs/heads/" + w.Branch
	head, rerr := safefile.ReadTarget(filepath.Join(gitDir, "HEAD"), 0)
	if got := strings.TrimSpace(string(head)); rerr != nil || got != want {
		to, _ := strings.CutPrefix(got, "ref: ")
		if !strings.HasPrefix(got, "ref: ") && got != "" {
			to = "a detached commit " + shortSHA(got)
		}
		changed = append(changed, fmt.Sprintf("the worktree's HEAD was moved off its branch %s to %s", w.Branch, cmp.Or(to, "nothing")))
		err = errors.Join(err, restoreFile(filepath.Join(gitDir, "HEAD"), fileState{data: []byte(want + "\n"), mode: 0o644}))
	}
	common, rerr := safefile.ReadTarget(filepath.Join(gitDir, "commondir"), 0)
	target := strings.TrimSpace(string(common))
	if target != "" && !filepath.IsAbs(target) {
		target = filepath.Join(gitDir, target)
	}
	if rerr != nil || !samePath(target, m.commonDir) {
		changed = append(changed, fmt.Sprintf("the worktree's commondir was pointed at %s", cmp.Or(target, "nothing")))
		rel, rerr := filepath.Rel(gitDir, m.commonDir)
		if rerr != nil {
			rel = m.commonDir
		}
		err = errors.Join(err, restoreFile(filepath.Join(gitDir, "commondir"), fileState{data: []byte(filepath.ToSlash(rel) + "\n"), mode: 0o644}))
	}
	return changed, err
}

// Repair puts an attempt's worktree back in order after its process died
// while the worker ran: no git lock left in its git folder or on its
// branch, the worktree's HEAD and commondir as restoreAdmin wants them,
// and no rebase, merge or cherry-pick left half done. The worker resumes
// there; what the dead worker did to them is not the resumed attempt's
// doing, and Guard must not blame it on it. It returns what it put back.
func (m *Manager) Repair(w *Worktree) ([]string, error) {
	gitDir, err := m.adminDir(w.Path)
	if err != nil {
		return nil, err
	}
	// Only the run that holds the lease works in this worktree and on
	// its branch, and it is starting: a lock there outlived its process.
	var changed []string
	for _, lock := range []string{
		filepath.Join(gitDir, "index.lock"), filepath.Join(gitDir, "HEAD.lock"), filepath.Join(gitDir, "ORIG_HEAD.lock"),
		m.refLock(w.Branch),
	} {
		if os.Remove(lock) == nil {
			changed = append(changed, "the stale lock "+lock+" was removed")
		}
	}
	admin, err := m.restoreAdmin(w, gitDir)
	changed = append(changed, admin...)
	for _, f := range []string{"rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "sequencer"} {
		path := filepath.Join(gitDir, f)
		if _, serr := os.Lstat(path); serr == nil {
			changed = append(changed, "the unfinished git operation in "+f+" was dropped")
			err = errors.Join(err, os.RemoveAll(path))
		}
	}
	return changed, err
}

// refLock is the lock file git makes while it updates a branch.
func (m *Manager) refLock(branch string) string {
	return filepath.Join(m.commonDir, filepath.FromSlash("refs/heads/"+branch)+".lock")
}

// samePath reports whether a and b name the same folder, links resolved.
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// refChanges names the refs that differ between two snapshots.
func refChanges(before, after map[string]string) []string {
	var out []string
	for name, sha := range before {
		if after[name] != sha {
			out = append(out, name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func restoreFile(path string, st fileState) error {
	if !st.mode.IsRegular() {
		return fmt.Errorf("put back %s: it was not a regular file", path)
	}
	tmp := path + ".taskloom-restore"
	if err := os.WriteFile(tmp, st.data, st.mode.Perm()); err != nil {
		return fmt.Errorf("put back %s: %w", path, err)
	}
	if err := os.Chmod(tmp, st.mode.Perm()); err != nil {
		return fmt.Errorf("put back %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("put back %s: %w", path, err)
	}
	return nil
}

// gitPathName names a guarded file as a user knows it.
func gitPathName(rel string) string {
	switch {
	case rel == "config":
		return "the repository's config"
	case strings.HasPrefix(rel, "hooks"+string(filepath.Separator)):
		return "hook " + filepath.Base(rel)
	}
	return ".git/" + filepath.ToSlash(rel)
}

// Check returns ErrNotFound when w's folder is gone and ErrBroken when its
// .git link or git metadata is, or nil.
func (m *Manager) Check(w *Worktree) error {
	_, err := m.adminDir(w.Path)
	return err
}

// RemoveAttempt removes what is left of an attempt's worktree and branch
// (see Remove), whatever state a worker left them in.
func (m *Manager) RemoveAttempt(ctx context.Context, run, taskID string, attempt int) error {
	w, err := m.worktree(run, taskID, attempt)
	if err != nil {
		return err
	}
	return m.Remove(ctx, w)
}
