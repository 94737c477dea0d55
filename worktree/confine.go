package worktree

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/internal/proc"

	"github.com/taskloom/taskloom/internal/safefile"
)

// ConfineOpts says how the commands run in an attempt's worktree are
// confined.
type ConfineOpts struct {
	// EnvAllow lists the variables the commands see (sandbox.env_allow).
	EnvAllow []string
	// Keep lists variables kept beyond EnvAllow, such as the provider key
	// an external agent CLI needs. Their values are still redacted.
	Keep []string
	// Network lets the commands reach the network.
	Network bool
	// Secrets are more values to redact from what the commands print.
	Secrets []string
	// Environ is the environment to reduce; nil means this process's.
	Environ []string
}

// Confine returns how commands run in dir, an attempt's worktree: with the
// environment reduced to EnvAllow plus a private TMPDIR, with git pinned
// to the worktree, and able to write only the worktree, its git metadata
// (its own admin folder, the repository's objects, and the refs and logs
// of its own task's attempt branches, which commits need), the TMPDIR and
// the toolchains' caches. Every other ref, the repository's config and
// hooks, the main checkout and taskloom's store stay read-only.
func (m *Manager) Confine(dir string, o ConfineOpts) (proc.Confinement, error) {
	dir = filepath.Clean(dir)
	gitDir, err := m.adminDir(dir)
	if err != nil {
		return proc.Confinement{}, err
	}
	tmp := filepath.Join(gitDir, "taskloom-tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return proc.Confinement{}, fmt.Errorf("confine %s: temp dir: %w", dir, err)
	}
	environ := o.Environ
	if environ == nil {
		environ = os.Environ()
	}
	allow := append(slices.Clone(o.EnvAllow), o.Keep...)
	env := proc.ReduceEnv(environ, allow,
		"TMPDIR="+tmp,
		// A worktree whose .git was deleted must not fall through to the
		// user's repository, which contains it.
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir),
		// The objects can be added to, not deleted: git's automatic
		// housekeeping after a commit, which repacks and deletes, could
		// only fail there, with a warning in the worker's output.
		"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=maintenance.auto", "GIT_CONFIG_VALUE_0=false",
		"GIT_CONFIG_KEY_1=gc.auto", "GIT_CONFIG_VALUE_1=0",
	)
	writable := []string{dir, gitDir, tmp}
	// Of the refs, only the folder of the attempt's own task branches is
	// writable: a worker commits there, and can move nothing else.
	if b, ok := m.branches.Load(dir); ok {
		refDir := filepath.Dir(filepath.FromSlash("refs/heads/" + b.(string)))
		for _, d := range []string{refDir, filepath.Join("logs", refDir)} {
			d = filepath.Join(m.commonDir, d)
			if err := os.MkdirAll(d, 0o755); err != nil {
				return proc.Confinement{}, fmt.Errorf("confine %s: %w", dir, err)
			}
			writable = append(writable, d)
		}
	}
	writable = append(writable, proc.CacheDirs(env)...)
	return proc.Confinement{
		Env: env,
		// A worker's commits add objects; none of the history's may go.
		Sandbox:  &proc.Policy{Writable: writable, AddOnly: []string{filepath.Join(m.commonDir, "objects")}, Network: o.Network},
		Redactor: proc.NewRedactor(environ, o.EnvAllow, o.Secrets...),
		TempDir:  tmp,
	}, nil
}

// adminDir returns the git admin folder of the worktree at dir
// (<common dir>/worktrees/<name>), read from its .git file. A worktree
// whose .git file is gone or points elsewhere is refused: git would run
// against another repository there.
func (m *Manager) adminDir(dir string) (string, error) {
	return m.adminDirOf(dir, true)
}

// adminDirOf is adminDir; owned also checks that the metadata names dir
// back, which a worktree taskloom has just moved does not do yet.
func (m *Manager) adminDirOf(dir string, owned bool) (string, error) {
	data, err := safefile.ReadTarget(filepath.Join(dir, ".git"), 0)
	if err != nil {
		if _, serr := os.Stat(dir); serr != nil {
			return "", fmt.Errorf("worktree %s is gone: %w", dir, ErrNotFound)
		}
		return "", fmt.Errorf("worktree %s has no .git file (was it deleted?): %w", dir, ErrBroken)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	gitDir, ok := strings.CutPrefix(line, "gitdir: ")
	if !ok {
		return "", fmt.Errorf("worktree %s: its .git file is not a gitdir link: %w", dir, ErrBroken)
	}
	if !filepath.IsAbs(gitDir) {
		gitDir = filepath.Join(dir, gitDir)
	}
	gitDir = filepath.Clean(gitDir)
	if filepath.Dir(gitDir) != filepath.Join(m.commonDir, "worktrees") {
		return "", fmt.Errorf("worktree %s: its .git points outside %s: %w", dir, m.commonDir, ErrBroken)
	}
	if st, err := os.Stat(gitDir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("worktree %s: its git metadata %s is gone: %w", dir, gitDir, ErrBroken)
	}
	if !owned {
		return gitDir, nil
	}
	// The metadata must be this worktree's own, which names it back: a
	// .git file pointed at another attempt's would have taskloom put that
	// one's HEAD back, and blame it.
	back, err := safefile.ReadTarget(filepath.Join(gitDir, "gitdir"), 0)
	if err != nil {
		return "", fmt.Errorf("worktree %s: its git metadata %s names no worktree: %w", dir, gitDir, ErrBroken)
	}
	owner := strings.TrimSpace(string(back))
	a, aerr := os.Stat(owner)
	b, berr := os.Stat(filepath.Join(dir, ".git"))
	if aerr != nil || berr != nil || !os.SameFile(a, b) {
		return "", fmt.Errorf("worktree %s: its .git points at the git metadata of another worktree (%s): %w", dir, filepath.Dir(owner), ErrBroken)
	}
	return gitDir, nil
}
