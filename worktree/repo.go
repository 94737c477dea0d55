package worktree

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotRepo: a folder is not inside a git working tree.
var ErrNotRepo = errors.New("not inside a git repository")

// FindRoot returns the top level of the git working tree that contains
// dir, or an error wrapping ErrNotRepo that names dir (git's own message is
// left out: it says the same, less clearly).
func FindRoot(ctx context.Context, dir string) (string, error) {
	m := &Manager{env: baseEnv("taskloom", "taskloom@localhost")}
	root, err := m.git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		if exitCode(err) > 0 {
			return "", fmt.Errorf("%s is %w", dir, ErrNotRepo)
		}
		return "", fmt.Errorf("find the git repository of %s: %w", dir, err)
	}
	return root, nil
}

// ExcludeTaskloom adds ".taskloom/" to the info/exclude file of the
// repository that contains dir, unless it is there.
func ExcludeTaskloom(ctx context.Context, dir string) error {
	m := &Manager{env: baseEnv("taskloom", "taskloom@localhost")}
	common, err := m.git(ctx, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return fmt.Errorf("find the git directory of %s: %w", dir, err)
	}
	m.commonDir = common
	return m.ensureExcluded()
}
