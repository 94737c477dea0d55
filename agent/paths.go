package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// PathError is a path a tool call may not use.
type PathError struct {
	Path   string
	Reason string
}

func (e *PathError) Error() string {
	return fmt.Sprintf("path %q: %s", e.Path, e.Reason)
}

// resolveInRoot resolves a model-supplied path against root, which must be
// absolute and free of symlinks. It rejects empty and absolute paths, paths
// whose cleaned form leaves root, and paths whose deepest existing ancestor
// resolves (through symlinks) outside root, or is a dangling symlink. It
// returns the resolved absolute path and the clean slash-separated path
// relative to root. It never creates anything.
func resolveInRoot(root, p string) (string, string, error) {
	if strings.TrimSpace(p) == "" {
		return "", "", &PathError{Path: p, Reason: "must not be empty"}
	}
	if filepath.IsAbs(p) || strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || filepath.VolumeName(p) != "" {
		return "", "", &PathError{Path: p, Reason: "absolute paths are not allowed; give a path relative to the worktree"}
	}
	if strings.HasPrefix(p, "~") {
		return "", "", &PathError{Path: p, Reason: "home-relative paths are not allowed; give a path relative to the worktree"}
	}
	if strings.ContainsRune(p, 0) {
		return "", "", &PathError{Path: p, Reason: "contains a NUL byte"}
	}
	clean := filepath.Clean(filepath.FromSlash(p))
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", "", &PathError{Path: p, Reason: "leaves the worktree through .."}
	}
	abs := filepath.Join(root, clean)
	real, err := resolveExisting(root, abs)
	if err != nil {
		return "", "", &PathError{Path: p, Reason: err.Error()}
	}
	return real, filepath.ToSlash(clean), nil
}

// resolveExisting finds the deepest existing ancestor of abs (abs included),
// resolves its symlinks, checks it stays inside root and returns it joined
// with the missing rest.
func resolveExisting(root, abs string) (string, error) {
	cur := abs
	var rest []string
	for {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			if !within(root, real) {
				return "", errors.New("resolves through a symlink to a location outside the worktree")
			}
			parts := append([]string{real}, reverse(rest)...)
			return filepath.Join(parts...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("cannot be resolved: %v", err)
		}
		if _, lerr := os.Lstat(cur); lerr == nil {
			// The entry exists but cannot be resolved: a dangling symlink,
			// whose target could be created anywhere.
			return "", errors.New("is or passes through a dangling symlink")
		}
		parent := filepath.Dir(cur)
		if parent == cur || !within(root, parent) {
			return "", errors.New("has no existing ancestor inside the worktree")
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[len(s)-1-i] = x
	}
	return out
}

// within reports whether p is root or inside it. Both must be clean.
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}

// realDir returns the absolute, symlink-free form of dir.
func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return real, nil
}

func isGitPath(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return first == ".git"
}
