package worktree

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
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
	gitDir, err := m.adminDir(w.Path)
	if err != nil {
		return "", false, fmt.Errorf("commit %s: %w", w.ID(), err)
	}
	head, err := worktreeHead(m.commonDir, gitDir)
	if err != nil {
		return "", false, fmt.Errorf("commit %s: %w", w.ID(), err)
	}
	if w.Base == "" || head != w.Base {
		if err := m.fold(ctx, w); err != nil {
			return "", false, err
		}
		if head, err = worktreeHead(m.commonDir, gitDir); err != nil {
			return "", false, fmt.Errorf("commit %s: %w", w.ID(), err)
		}
	}
	// Nothing staged makes git commit exit 1 and move nothing. The trailer
	// is written here rather than by --trailer, which starts
	// interpret-trailers; nor does the commit start git maintenance.
	_, err = m.git(ctx, w.Path, "-c", "commit.gpgsign=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
		"commit", "-q", "--no-verify", "--cleanup=strip", "-m", withTrailer(message, w.Trailer()))
	changed = err == nil
	sha, herr := worktreeHead(m.commonDir, gitDir)
	if err != nil && (exitCode(err) != 1 || herr != nil || sha != head) {
		return "", false, fmt.Errorf("commit %s: %w", w.ID(), err)
	}
	if herr != nil {
		return "", false, fmt.Errorf("commit %s: %w", w.ID(), herr)
	}
	m.logger.InfoContext(ctx, "attempt committed", slog.String("attempt", w.ID()),
		slog.String("commit", sha), slog.Bool("changed", changed))
	return sha, changed, nil
}

// fold moves the branch back to the commit the attempt started from,
// keeping what its commits changed staged, so that the next commit
// carries all of it.
func (m *Manager) fold(ctx context.Context, w *Worktree) error {
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
		return fmt.Errorf("commit %s: %w", w.ID(), err)
	}
	if out == "" {
		return nil
	}
	lines := strings.Split(out, "\n")
	fields := strings.Fields(lines[len(lines)-1])
	if len(fields) < 2 {
		return fmt.Errorf("commit %s: the branch starts from a root commit, not from %s", w.ID(), m.mainBranch)
	}
	if _, err := m.git(ctx, w.Path, "reset", "-q", "--soft", fields[1]); err != nil {
		return fmt.Errorf("commit %s: fold earlier commits: %w", w.ID(), err)
	}
	return nil
}

// withTrailer ends message with the trailer line: in the message's own
// trailer block when its last paragraph is one, else in a paragraph of its
// own.
func withTrailer(message, trailer string) string {
	if i := strings.LastIndex(message, "\n\n"); i >= 0 && isTrailerBlock(message[i+2:]) {
		return message + "\n" + trailer
	}
	return message + "\n\n" + trailer
}

var trailerLine = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*:\s`)

func isTrailerBlock(p string) bool {
	for line := range strings.SplitSeq(p, "\n") {
		if !trailerLine.MatchString(line) {
			return false
		}
	}
	return true
}

// CommitPatch returns the message of the commit checked out in w and what
// it changes (a patch against its parent), read without starting git.
func (m *Manager) CommitPatch(_ context.Context, w *Worktree) (string, error) {
	gitDir, err := m.adminDir(w.Path)
	if err != nil {
		return "", err
	}
	head, err := worktreeHead(m.commonDir, gitDir)
	if err != nil {
		return "", fmt.Errorf("read the commit of %s: %w", w.ID(), err)
	}
	out, err := m.objects.patch(head)
	if err != nil {
		return "", fmt.Errorf("read the commit of %s: %w", w.ID(), err)
	}
	return out, nil
}
