package report

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/nodes"
)

// Export is the agent conversations of one attempt of a task, written to
// Dirs.
type Export struct {
	Task    string
	Attempt int
	Dirs    []string
}

// ExportConversations writes the conversations of attempt (0: the last)
// of task of run runID: into dir when there is one, else one folder per
// Ralph iteration ("iteration-N"). agent.Export puts subtasks in
// subfolders.
func ExportConversations(ctx context.Context, s *session.Session, runID, task string, attempt int, dir string) (Export, error) {
	ex := Export{Task: task, Attempt: attempt}
	ids, err := s.Store.Conversations(ctx, runID, task)
	if err != nil {
		return ex, err
	}
	if len(ids) == 0 {
		return ex, noConversations(ctx, s, runID, task)
	}
	type conv struct {
		id        string
		attempt   int
		iteration int
	}
	var convs []conv
	attempts := map[int]bool{}
	last := 0
	for _, id := range ids {
		_, a, it, err := nodes.ParseConversationID(runID, id)
		if err != nil {
			return ex, err
		}
		convs = append(convs, conv{id, a, it})
		attempts[a] = true
		last = max(last, a)
	}
	if ex.Attempt == 0 {
		ex.Attempt = last
	}
	if !attempts[ex.Attempt] {
		var have []string
		for a := 1; a <= last; a++ {
			if attempts[a] {
				have = append(have, strconv.Itoa(a))
			}
		}
		return ex, fmt.Errorf("task %s of run %s has no conversation for attempt %d; it has attempt(s) %s", task, runID, ex.Attempt, strings.Join(have, ", "))
	}
	var sel []conv
	for _, c := range convs {
		if c.attempt == ex.Attempt {
			sel = append(sel, c)
		}
	}
	hist := s.Store.Histories(runID)
	for _, c := range sel {
		d := dir
		if len(sel) > 1 {
			d = filepath.Join(dir, fmt.Sprintf("iteration-%d", c.iteration))
		}
		if err := agent.Export(ctx, hist, c.id, d); err != nil {
			return ex, fmt.Errorf("export %s attempt %d of run %s: %w", task, ex.Attempt, runID, err)
		}
		ex.Dirs = append(ex.Dirs, d)
	}
	return ex, nil
}

// noConversations says why a task has no conversations.
func noConversations(ctx context.Context, s *session.Session, runID, task string) error {
	g, err := s.Graph()
	if err != nil {
		return err
	}
	head, _, err := session.HeadState(ctx, g, runID)
	if err != nil {
		return err
	}
	if _, ok := head.State.Tasks.Get(task); !ok {
		ids := idList(head.State.Tasks.Keys(), 20)
		if ids == "" {
			ids = "-"
		}
		return fmt.Errorf("run %s has no task %s; its tasks are %s", runID, task, ids)
	}
	return fmt.Errorf("task %s of run %s has no agent conversations: it has not started, or its worker (a command worker) keeps none", task, runID)
}

// Write says where the conversations went.
func (ex Export) Write(w io.Writer) error {
	if len(ex.Dirs) == 1 {
		_, err := fmt.Fprintf(w, "wrote the conversation of %s attempt %d to %s\n", ex.Task, ex.Attempt, ex.Dirs[0])
		return err
	}
	fmt.Fprintf(w, "wrote %d conversations (Ralph iterations) of %s attempt %d:\n", len(ex.Dirs), ex.Task, ex.Attempt)
	for _, d := range ex.Dirs {
		fmt.Fprintf(w, "  %s\n", d)
	}
	return nil
}
