package worktree

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// Commit stages everything the worker changed in the worktree, honouring
// .gitignore, .git/info/exclude and core.excludesFile (untracked files that
// match Opts.Include are left out too), and commits it with message and the
// trailer "Taskloom-Task: RUN/TASK/ATTEMPT".
//
// The branch always ends up with at most one commit on top of the main
// commit it started from (w.Base): commits the worker made itself, and an
// earlier Commit of the same attempt, are folded into this one. Commits
// below the base are never folded in, even when main no longer has them. When there is
// nothing to commit, Commit makes no commit and returns the branch's head
// with changed false. Commit hooks do not run, and the commit is not signed.
func (m *Manager) Commit(ctx context.Context, w *Worktree, message string) (sha string, changed bool, err error) {
	if message = strings.TrimSpace(message); message == "" {
		message = fmt.Sprintf("taskloom: task %s, attempt %d", w.TaskID, w.Attempt)
	}
	add := []string{"add", "-A"}
	// Ignored files stay out anyway; name the others to leave out.
	skip, err := m.untrackedIncludes(ctx, w.Path, false)
	if err != nil {
		return "", false, fmt.Errorf("commit %s: %w", w.ID(), err)
	}
	if len(skip) > 0 {
		add = append(add, "--", ".")
		for _, f := range skip {
			add = append(add, ":(exclude,literal)"+f)
		}
	}
	if _, err := m.git(ctx, w.Path, add...); err != nil {
		return "", false, fmt.Errorf("commit %s: %w", w.ID(), err)
	}
	// Commits on the branch that neither main nor the attempt's base has,
	// oldest last; the first parent of the oldest is the commit the attempt
	// started from. Excluding the base matters when main was reset under
	// the attempt: the commits the user dropped from main are then still
	// below HEAD, and must not be folded into the attempt's commit.
	args := []string{"log", "--first-parent", "--format=%H %P", "HEAD", "--not", m.mainRef}
	if w.Base != "" {
		args = append(args, w.Base)
	}
	out, err := m.git(ctx, w.Path, append(args, "--")...)
	if err != nil {
		return "", false, fmt.Errorf("commit %s: %w", w.ID(), err)
	}
	if out != "" {
		lines := strings.Split(out, "\n")
		fields := strings.Fields(lines[len(lines)-1])
		if len(fields) < 2 {
			return "", false, fmt.Errorf("commit %s: the branch starts from a root commit, not from %s", w.ID(), m.mainBranch)
		}
		if _, err := m.git(ctx, w.Path, "reset", "-q", "--soft", fields[1]); err != nil {
			return "", false, fmt.Errorf("commit %s: fold earlier commits: %w", w.ID(), err)
		}
	}
	if _, err := m.git(ctx, w.Path, "diff", "--cached", "--quiet"); err != nil {
		if exitCode(err) != 1 {
			return "", false, fmt.Errorf("commit %s: %w", w.ID(), err)
		}
		changed = true
	}
	if changed {
		if _, err := m.git(ctx, w.Path, "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify",
			"--cleanup=strip", "-m", message, "--trailer", w.Trailer()); err != nil {
			return "", false, fmt.Errorf("commit %s: %w", w.ID(), err)
		}
	}
	sha, err = m.git(ctx, w.Path, "rev-parse", "HEAD")
	if err != nil {
		return "", false, fmt.Errorf("commit %s: %w", w.ID(), err)
	}
	m.logger.InfoContext(ctx, "attempt committed", slog.String("attempt", w.ID()),
		slog.String("commit", sha), slog.Bool("changed", changed))
	return sha, changed, nil
}
