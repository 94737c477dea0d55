package session

import (
	"context"
	"fmt"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/integrations/linear"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/nodes"
)

// catchUpWait bounds how long resuming a completed run waits for the
// Linear sync to catch up.
const catchUpWait = 20 * time.Second

// driven returns the runner of a run this process drives: with the
// config's Linear sync when it is on, shared by the session's runs and
// closed with it. A sync on without LINEAR_API_KEY is said once on
// stderr, and the run goes on without it.
func (s *Session) driven(p *nodes.Pipeline) *nodes.Runner {
	r := s.Runner(p)
	s.linearOnce.Do(func() { s.linear = linear.Attach(r, s.Cfg, s.stderr, s.Logger) })
	if s.linear != nil {
		r.Sync = s.linear
	}
	return r
}

// syncBehind says on stderr, in one line, what the Linear sync has not
// mirrored yet when a run stops; a resume catches it up.
func (s *Session) syncBehind() {
	if s.linear == nil {
		return
	}
	now, cancel := context.WithCancel(context.Background())
	cancel() // the run already waited for it
	if err := s.linear.Drain(now); err != nil {
		fmt.Fprintf(s.stderr, "taskloom: warning: %s\n", clip.Line(err.Error(), 0))
	}
}

// catchUp is the resume of a completed run: nothing runs, the Linear sync
// (when on) is handed every task and waited for, and the issue IDs it has
// are recorded on the tasks. What it could not do is a warning: the run
// itself is complete.
func (s *Session) catchUp(ctx context.Context, runID string) (graph.Result[nodes.State], error) {
	r := s.driven(&nodes.Pipeline{RunID: runID})
	g, err := r.Runnable()
	if err != nil {
		return graph.Result[nodes.State]{}, err
	}
	if err := r.CatchUp(ctx, runID, catchUpWait); err != nil {
		fmt.Fprintf(s.stderr, "taskloom: warning: %s\n", clip.Line(err.Error(), 0))
	}
	res, _, err := HeadState(ctx, g, runID)
	return res, err
}
