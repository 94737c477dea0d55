package worktree

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/taskloom/taskloom/internal/safefile"
)

// Sentinel errors. The error types below match them with errors.Is.
var (
	// ErrDirty: the worktree that has main checked out has uncommitted
	// changes to tracked files (see *DirtyError).
	ErrDirty = errors.New("uncommitted changes")
	// ErrConflict: an attempt conflicts with main (see *ConflictError).
	ErrConflict = errors.New("conflict with main")
	// ErrExists: the attempt already has a worktree or a branch.
	ErrExists = errors.New("worktree already exists")
	// ErrNotFound: the attempt has no worktree or branch.
	ErrNotFound = errors.New("worktree not found")
)

// DirtyError says that a checkout of main has local changes that taskloom
// must not overwrite.
type DirtyError struct {
	Path   string   // the worktree that has main checked out
	Branch string   // main's name
	Files  []string // changed tracked files, when known
	Detail string   // git's reason, when integration was refused
	// Locks are git lock files left in the checkout's git folder or on
	// its branch: a git command stopped midway there, and the changes may
	// be what it left, not the user's edits.
	Locks []string
}

func (e *DirtyError) Error() string {
	files := ""
	if len(e.Files) > 0 {
		files = " (" + shortList(e.Files) + ")"
	}
	if e.Detail != "" {
		return fmt.Sprintf("%s, where %s is checked out, has local changes in the way%s: %s: commit, stash or move them, then run taskloom again",
			e.Path, e.Branch, files, e.Detail)
	}
	if len(e.Locks) > 0 {
		return fmt.Sprintf("%s, where %s is checked out, has uncommitted changes to tracked files%s, and git's lock files %s remain: "+
			"a git command stopped midway there (taskloom's own merge, if a run was killed while it integrated). "+
			"If no git command is running, remove the lock files, then drop what it left (git restore --staged --worktree -- FILES) or keep it (commit or stash), and run taskloom again",
			e.Path, e.Branch, files, strings.Join(e.Locks, ", "))
	}
	return fmt.Sprintf("%s, where %s is checked out, has uncommitted changes to tracked files%s: commit or stash them, then run taskloom again",
		e.Path, e.Branch, files)
}

// Is makes errors.Is(err, ErrDirty) true.
func (e *DirtyError) Is(target error) bool { return target == ErrDirty }

// Opts configures a Manager. A nil *Opts means defaults.
type Opts struct {
	// Include lists globs of untracked files to copy from the repository
	// folder into every new worktree, such as ".env" (the worktree.include
	// config). They are git pathspec globs relative to the repository root:
	// "*" stays inside a directory, "**" crosses directories. Untracked
	// files that match them are never committed from a worktree.
	Include []string
	// MainBranch is the branch attempts start from and integrate into.
	// Default: the branch checked out in repoDir, or "main" when its HEAD is
	// detached.
	MainBranch string
	// NeedBranch: with MainBranch empty, a detached HEAD is an error
	// rather than "main". A new run integrates into the branch the user
	// has checked out, and there is none to pick.
	NeedBranch bool
	// AuthorName and AuthorEmail are the identity of the commits taskloom
	// makes (default "taskloom" and "taskloom@localhost").
	AuthorName  string
	AuthorEmail string
	// Logger receives what the manager does; nil discards it.
	Logger *slog.Logger
	// ConfinedRefs says that the attempts' commands run confined as
	// Confine says, by a sandbox that enforces it (Landlock): they cannot
	// move a ref outside their own task's branches. A ref that changes
	// during an attempt was then moved by someone else (the user), and
	// Restore leaves it as it is rather than undo the user's change.
	ConfinedRefs bool
	// RemoteTimeout bounds one git command that talks to a remote (push,
	// fetch, ls-remote): a remote that stops answering fails the command
	// rather than hang the run. Default: 10 minutes.
	RemoteTimeout time.Duration
}

// Manager creates, commits, integrates and removes the worktrees of task
// attempts in one repository. It is safe for concurrent use.
type Manager struct {
	root       string // top level of the repository folder
	commonDir  string // the repository's common git directory
	dir        string // root/.taskloom/worktrees
	mainBranch string
	mainRef    string // refs/heads/<mainBranch>
	include    []string
	logger     *slog.Logger
	env        []string
	name       string // the identity of taskloom's commits
	email      string
	mergeBase  bool // git merge-tree knows --merge-base (git 2.40+)
	objects    *objectStore

	adminMu sync.Mutex // serializes worktree add, remove and prune; guards idle
	// addMu keeps fetches (read) apart from git worktree add (write),
	// which leaves a placeholder HEAD that a fetch reads as a bad object;
	// fetches go on side by side, and with everything else.
	addMu sync.RWMutex
	// idle holds removed attempts' worktrees, parked detached under
	// .taskloom/worktrees/_idle-*, for Create to reuse (see reuse).
	idle    []string
	idleSeq int

	branches      sync.Map // attempt worktree path -> its branch
	confinedRefs  bool
	remoteTimeout time.Duration

	integrateMu sync.Mutex // serializes Integrate; guards the fields below
	integrated  map[string]string
	scanned     string // main's head up to which integrated is complete
}

// Open checks the repository that contains repoDir and returns its Manager.
// It refuses a checkout of main with uncommitted changes to tracked files
// (*DirtyError), and adds ".taskloom/" to the repository's
// .git/info/exclude.
func Open(ctx context.Context, repoDir string, opts *Opts) (*Manager, error) {
	if opts == nil {
		opts = &Opts{}
	}
	m := &Manager{
		include:       opts.Include,
		confinedRefs:  opts.ConfinedRefs,
		remoteTimeout: cmp.Or(opts.RemoteTimeout, 10*time.Minute),
		logger:        opts.Logger,
		integrated:    make(map[string]string),
	}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}
	name, email := opts.AuthorName, opts.AuthorEmail
	if name == "" {
		name = "taskloom"
	}
	if email == "" {
		email = "taskloom@localhost"
	}
	m.env = baseEnv(name, email)
	m.name, m.email = name, email

	version, err := m.git(ctx, repoDir, "version")
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", repoDir, err)
	}
	major, minor, ok := parseVersion(version)
	if !ok || major < 2 || (major == 2 && minor < 38) {
		return nil, fmt.Errorf("open %s: %s is too old: taskloom needs git 2.38 or later (merge-tree --write-tree)", repoDir, version)
	}
	m.mergeBase = major > 2 || minor >= 40

	out, err := m.git(ctx, repoDir, "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir")
	if err != nil {
		return nil, fmt.Errorf("open %s: not a git working tree: %w", repoDir, err)
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 2 {
		return nil, fmt.Errorf("open %s: unexpected rev-parse output %q", repoDir, out)
	}
	m.root, m.commonDir = filepath.Clean(lines[0]), filepath.Clean(lines[1])
	m.dir = filepath.Join(m.root, ".taskloom", "worktrees")
	// Git in a worktree whose .git was deleted must not fall through to
	// the user's repository, which contains it.
	ceiling := m.dir
	if real, err := filepath.EvalSymlinks(m.root); err == nil {
		ceiling = filepath.Join(real, ".taskloom", "worktrees")
	}
	m.env = append(m.env, "GIT_CEILING_DIRECTORIES="+ceiling)
	m.objects = newObjectStore(m.commonDir)

	m.mainBranch = opts.MainBranch
	if m.mainBranch == "" {
		m.mainBranch = "main"
		if b, err := m.git(ctx, m.root, "symbolic-ref", "-q", "--short", "HEAD"); err == nil && b != "" {
			m.mainBranch = b
		} else if opts.NeedBranch {
			return nil, fmt.Errorf("HEAD is detached in %s: check out the branch the run should integrate into", m.root)
		}
	}
	m.mainRef = "refs/heads/" + m.mainBranch
	if _, err := m.Head(ctx); err != nil {
		if _, herr := m.git(ctx, m.root, "rev-parse", "-q", "--verify", "HEAD^{commit}"); herr == nil {
			return nil, fmt.Errorf("open %s: main branch %q does not exist: check out the branch to integrate into, or create it", m.root, m.mainBranch)
		}
		return nil, fmt.Errorf("open %s: branch %s has no commit yet: a run starts its attempts from one; make a first commit (git commit --allow-empty -m init)", m.root, m.mainBranch)
	}

	checkout, err := m.mainCheckout(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", m.root, err)
	}
	if checkout != "" {
		status, err := m.run(ctx, gitCmd{dir: checkout, args: []string{"status", "--porcelain", "-z", "--untracked-files=no"}})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", m.root, err)
		}
		if files := statusFiles(status); len(files) > 0 {
			return nil, &DirtyError{Path: checkout, Branch: m.mainBranch, Files: files, Locks: m.staleLocks(ctx, checkout)}
		}
	}
	if err := m.ensureExcluded(); err != nil {
		return nil, fmt.Errorf("open %s: %w", m.root, err)
	}
	m.logger.InfoContext(ctx, "worktree manager open",
		slog.String("repo", m.root), slog.String("main_branch", m.mainBranch), slog.String("main_checkout", checkout))
	return m, nil
}

// committer is the identity of the commits taskloom writes itself, now.
func (m *Manager) committer() object.Signature {
	return object.Signature{Name: m.name, Email: m.email, When: time.Now()}
}

// Root returns the top level of the repository folder.
func (m *Manager) Root() string { return m.root }

// MainBranch returns the name of the branch attempts integrate into.
func (m *Manager) MainBranch() string { return m.mainBranch }

// ensureExcluded adds .taskloom/ to info/exclude unless it is there.
func (m *Manager) ensureExcluded() error {
	path := filepath.Join(m.commonDir, "info", "exclude")
	data, err := safefile.ReadTarget(path, 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		switch strings.TrimSpace(line) {
		case ".taskloom", ".taskloom/", "/.taskloom", "/.taskloom/":
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("add .taskloom/ to %s: %w", path, err)
	}
	add := ".taskloom/\n"
	if len(data) > 0 && data[len(data)-1] != '\n' {
		add = "\n" + add
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("add .taskloom/ to %s: %w", path, err)
	}
	if _, err := f.WriteString(add); err != nil {
		f.Close()
		return fmt.Errorf("add .taskloom/ to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("add .taskloom/ to %s: %w", path, err)
	}
	return nil
}

// worktreeEntry is one record of `git worktree list --porcelain`.
type worktreeEntry struct {
	path, head, branch string
	prunable           bool
	// unlock is the lock file that git worktree add leaves when it is
	// killed while it adds the worktree: it guards nothing, and prune
	// skips a locked worktree until it is removed.
	unlock string
}

// worktrees lists the repository's worktrees as `git worktree list`
// does, from the files git keeps about them: the main worktree (unless the
// repository is bare), then each linked one.
func (m *Manager) worktrees(context.Context) ([]worktreeEntry, error) {
	var list []worktreeEntry
	if filepath.Base(m.commonDir) == ".git" {
		main := worktreeEntry{path: filepath.Dir(m.commonDir)}
		main.branch = symbolicHead(filepath.Join(m.commonDir, "HEAD"))
		list = append(list, main)
	}
	admin := filepath.Join(m.commonDir, "worktrees")
	entries, err := os.ReadDir(admin)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	for _, e := range entries {
		dir := filepath.Join(admin, e.Name())
		if !e.IsDir() {
			continue
		}
		w := worktreeEntry{branch: symbolicHead(filepath.Join(dir, "HEAD"))}
		data, err := safefile.ReadTarget(filepath.Join(dir, "gitdir"), 0)
		if err != nil {
			w.prunable = true
			w.path = dir
		} else {
			dotGit := strings.TrimSpace(string(data))
			w.path = filepath.Clean(strings.TrimSuffix(dotGit, string(filepath.Separator)+".git"))
			if _, err := os.Stat(dotGit); err != nil {
				lock := filepath.Join(dir, "locked")
				reason, lerr := safefile.ReadTarget(lock, 0)
				w.prunable = lerr != nil
				if lerr == nil && strings.TrimSpace(string(reason)) == "initializing" {
					w.prunable, w.unlock = true, lock
				}
			}
		}
		list = append(list, w)
	}
	return list, nil
}

// symbolicHead returns the ref a HEAD file names, or "" when it is
// detached or unreadable.
func symbolicHead(path string) string {
	data, err := safefile.ReadTarget(path, 0)
	if err != nil {
		return ""
	}
	ref, _ := strings.CutPrefix(strings.TrimSpace(string(data)), "ref: ")
	if !strings.HasPrefix(ref, "refs/") {
		return ""
	}
	return ref
}

// mainCheckout returns the worktree that has main checked out, or "".
func (m *Manager) mainCheckout(ctx context.Context) (string, error) {
	list, err := m.worktrees(ctx)
	if err != nil {
		return "", err
	}
	for _, w := range list {
		if w.branch == m.mainRef && !w.prunable {
			return w.path, nil
		}
	}
	return "", nil
}

// statusFiles returns the paths of `git status --porcelain -z` output.
func statusFiles(out string) []string {
	var files []string
	fields := strings.Split(out, "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) < 4 {
			continue
		}
		files = append(files, f[3:])
		if f[0] == 'R' || f[0] == 'C' {
			i++ // the source of a rename or copy follows
		}
	}
	return files
}

func parseVersion(v string) (major, minor int, ok bool) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "git version ")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

func shortList(files []string) string {
	const most = 5
	if len(files) <= most {
		return strings.Join(files, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(files[:most], ", "), len(files)-most)
}

// staleLocks lists the git lock files of checkout's index, HEAD and main
// branch that exist: left by a git command that stopped midway, or held by
// one that runs now.
func (m *Manager) staleLocks(ctx context.Context, checkout string) []string {
	out, err := m.git(ctx, checkout, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return nil
	}
	gitDir := strings.TrimSpace(out)
	var locks []string
	for _, lock := range []string{filepath.Join(gitDir, "index.lock"), filepath.Join(gitDir, "HEAD.lock"), m.refLock(m.mainBranch)} {
		if _, err := os.Lstat(lock); err == nil {
			locks = append(locks, lock)
		}
	}
	return locks
}
