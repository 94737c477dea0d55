package nodes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/safefile"
	"github.com/taskloom/taskloom/worktree"
)

// gitOutput runs git in dir, the top of a worktree, and returns its
// standard output.
func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	res, err := proc.Run(ctx, proc.Cmd{Args: append([]string{"git"}, args...), Dir: dir, Env: worktree.GitEnvAt(dir)})
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("git %s: exit status %d: %s", strings.Join(args, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return res.Stdout, nil
}

// WorktreeDiff returns the Ralph loop's report of the changes in dir, an
// attempt's worktree: its head commit, which moves when the worker
// commits, then the status and the diff of what is not committed, so that
// a file edited again changes the report. Iterations that leave it
// unchanged stagnate.
//
// Its git runs confined as the worker's own commands are. It runs between
// iterations, before the guard has looked at the worktree's git metadata,
// which the worker can write: git reads its config (and so an fsmonitor
// command) through the .git file and commondir found there, so an
// unconfined git would run what a worker put in place with taskloom's
// rights, outside the sandbox.
func WorktreeDiff(confine agent.ConfineFunc) func(ctx context.Context, dir string) (string, error) {
	return func(ctx context.Context, dir string) (string, error) {
		cf, err := confine(dir)
		if err != nil {
			return "", err
		}
		git := func(args ...string) (string, error) {
			args = append([]string{"git", "-c", "core.fsmonitor=false"}, args...)
			c := proc.Cmd{Args: args, Dir: dir, Timeout: diffTimeout}
			res, err := proc.Run(ctx, cf.Apply(c))
			switch {
			case err != nil:
				return "", fmt.Errorf("%s: %w", strings.Join(args, " "), err)
			case res.TimedOut:
				return "", fmt.Errorf("%s: timed out after %s", strings.Join(args, " "), diffTimeout)
			case res.ExitCode != 0:
				return "", fmt.Errorf("%s: exit status %d: %s", strings.Join(args, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
			}
			return res.Stdout, nil
		}
		var b strings.Builder
		for _, args := range [][]string{{"rev-parse", "HEAD"}, {"status", "--porcelain", "--untracked-files=all"}, {"diff", "--no-ext-diff", "--no-textconv", "HEAD"}} {
			out, err := git(args...)
			if err != nil {
				return "", err
			}
			b.WriteString(out)
		}
		untracked, err := git("ls-files", "--others", "--exclude-standard", "-z")
		if err != nil {
			return "", err
		}
		for _, f := range strings.FieldsFunc(untracked, func(r rune) bool { return r == 0 }) {
			// Their content, so that one written again changes the report.
			fmt.Fprintf(&b, "%q %s\n", f, contentID(filepath.Join(dir, filepath.FromSlash(f))))
		}
		return b.String(), nil
	}
}

// contentID stands for the content of a file the worker made, read here
// rather than by git, which fails on a name it cannot take on a line and
// on a dangling symlink: a regular file's hash (or, past the file tools'
// limit, its size and time), a symlink's target, another kind's mode.
func contentID(path string) string {
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return "gone"
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(path)
		return "link " + target
	case !fi.Mode().IsRegular():
		return fi.Mode().String()
	}
	data, err := safefile.ReadFile(path, maxHashed)
	if err != nil {
		return fmt.Sprintf("%d bytes at %s", fi.Size(), fi.ModTime().UTC().Format(time.RFC3339Nano))
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// maxHashed bounds a file WorktreeDiff reads whole.
const maxHashed = 16 << 20

// diffTimeout bounds each git of WorktreeDiff.
const diffTimeout = 2 * time.Minute
