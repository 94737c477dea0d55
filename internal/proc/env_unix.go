//go:build !windows

package proc

import (
	"os"
	"os/exec"
	"path/filepath"
)

func envKey(name string) string { return name }

// lookPathIn finds an executable file named name in the directories of
// path.
func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &notFoundError{name: name}
}

type notFoundError struct{ name string }

func (e *notFoundError) Error() string {
	return "executable file " + e.name + " not found in the command's PATH"
}

// Unwrap makes errors.Is(err, exec.ErrNotFound) true.
func (e *notFoundError) Unwrap() error { return exec.ErrNotFound }
