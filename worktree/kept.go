package worktree

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// Keep makes sure an attempt's commit is kept under its KeptRef,
// refs/taskloom/attempts/RUN/TASK/ATTEMPT, as Remove keeps it, and returns
// that name. A reviewer is shown the ref, so
// it must resolve even when the attempt's branch went away some other way
// (deleted by hand, say) while its commit is still in the repository.
func (m *Manager) Keep(ctx context.Context, run, taskID string, attempt int, sha string) (string, error) {
	w, err := m.worktree(run, taskID, attempt)
	if err != nil {
		return "", err
	}
	ref := w.KeptRef()
	if got, err := m.git(ctx, m.root, "rev-parse", "-q", "--verify", ref+"^{commit}"); err == nil && got == sha {
		return ref, nil
	}
	if _, err := m.git(ctx, m.root, "update-ref", ref, sha); err != nil {
		return "", fmt.Errorf("keep attempt %s: %w", w.ID(), err)
	}
	return ref, nil
}

// DropAttempt deletes the ref that keeps one attempt's commit, for a clone
// that handed the commit on (a worker's, which pushed it to the run's
// remote): no review there will show it.
func (m *Manager) DropAttempt(ctx context.Context, run, taskID string, attempt int) error {
	w, err := m.worktree(run, taskID, attempt)
	if err != nil {
		return err
	}
	if _, err := m.git(ctx, m.root, "update-ref", "-d", w.KeptRef()); err != nil {
		return fmt.Errorf("drop the kept commit of attempt %s: %w", w.ID(), err)
	}
	return nil
}

// DropKept deletes the refs that keep a run's unintegrated attempts
// (refs/taskloom/attempts/RUN/…). They are kept until the run ends, for
// its review; after that they would only pile up. It returns how many it
// deleted.
func (m *Manager) DropKept(ctx context.Context, run string) (int, error) {
	if !validID(run) {
		return 0, fmt.Errorf("drop kept attempts of run %q: not a run ID", run)
	}
	out, err := m.git(ctx, m.root, "for-each-ref", "--format=%(refname)", keptPrefix+run+"/")
	if err != nil {
		return 0, fmt.Errorf("drop kept attempts of run %s: %w", run, err)
	}
	var in strings.Builder
	n := 0
	for ref := range strings.SplitSeq(out, "\n") {
		if ref = strings.TrimSpace(ref); ref != "" {
			fmt.Fprintf(&in, "delete %s\n", ref)
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := m.run(ctx, gitCmd{dir: m.root, args: []string{"update-ref", "--stdin"}, stdin: in.String()}); err != nil {
		return 0, fmt.Errorf("drop kept attempts of run %s: %w", run, err)
	}
	m.logger.InfoContext(ctx, "kept attempt refs dropped", slog.String("run", run), slog.Int("refs", n))
	return n, nil
}
