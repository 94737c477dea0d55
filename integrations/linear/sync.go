package linear

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
)

// stateTypes maps a task status to the Linear state type its issue is
// moved to; statuses not listed (failed, blocked) leave the issue where
// it is.
var stateTypes = map[planner.Status]string{
	planner.StatusPending:    "unstarted",
	planner.StatusInProgress: "started",
	planner.StatusCompleted:  "completed",
	planner.StatusSkipped:    "canceled",
}

// SyncOpts configures a Syncer.
type SyncOpts struct {
	Client *Client
	TeamID string
	// Project, when true, puts the run's issues in a project of their own,
	// named after the run.
	Project bool
	// MinBackoff and MaxBackoff bound the wait between retries after a
	// failure; defaults 1s and 30s.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

// Syncer mirrors the tasks of runs to Linear in the background. It is safe
// for concurrent use; Tasks never blocks.
type Syncer struct {
	o    SyncOpts
	kick chan struct{}
	once sync.Once
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	want    map[key]planner.Task // the tasks as the run last showed them
	synced  map[key]string       // the state ID each issue was last moved to
	issues  map[key]string       // the issue ID of each task, once it exists
	ready   map[string]bool      // runs whose project exists
	states  map[string]string    // the team's state ID by state type
	idle    *sync.Cond
	pending int // tasks not yet as wanted, after the last pass
	lastErr error
}

type key struct{ run, task string }

// NewSyncer returns a Syncer; it starts working on the first Tasks.
func NewSyncer(o SyncOpts) *Syncer {
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Syncer{o: o, kick: make(chan struct{}, 1), done: make(chan struct{}),
		want: map[key]planner.Task{}, synced: map[key]string{}, issues: map[key]string{}, ready: map[string]bool{}}
	s.idle = sync.NewCond(&s.mu)
	return s
}

// FromConfig returns the Syncer of integrations.linear, with the key from
// LINEAR_API_KEY; nil when the sync is off. Enabled without a key is an
// error that names the variable.
func FromConfig(cfg config.Config, logger *slog.Logger) (*Syncer, error) {
	l := cfg.Integrations.Linear
	if !l.Enabled {
		return nil, nil
	}
	key := os.Getenv(KeyEnv)
	if key == "" {
		return nil, fmt.Errorf("integrations.linear.enabled is true but %s is not set; set it or turn the sync off", KeyEnv)
	}
	return NewSyncer(SyncOpts{Client: NewClient(l.URL, key), TeamID: l.TeamID, Project: l.CreateProject, Logger: logger}), nil
}

// Tasks hands on a run's tasks as they now are.
func (s *Syncer) Tasks(runID string, tasks []planner.Task) {
	if s == nil || len(tasks) == 0 {
		return
	}
	s.once.Do(s.start)
	s.mu.Lock()
	for _, t := range tasks {
		s.want[key{runID, t.ID}] = t
	}
	s.pending = s.unsynced()
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// IssueID returns the Linear issue ID of a run's task, once the issue
// exists.
func (s *Syncer) IssueID(runID, taskID string) string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issues[key{runID, taskID}]
}

// Drain waits until every task handed on is mirrored, or ctx ends; it
// returns the last error when it had to give up.
func (s *Syncer) Drain(ctx context.Context) error {
	if s == nil {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.idle.Broadcast()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	// A key Linear refused, or a team it does not know, is not waited
	// out: no retry will mend it.
	for s.pending > 0 && ctx.Err() == nil && !errors.Is(s.lastErr, ErrUnauthorized) && !errors.Is(s.lastErr, ErrUnknownTeam) {
		s.idle.Wait()
	}
	if s.pending > 0 {
		if errors.Is(s.lastErr, ErrUnauthorized) || errors.Is(s.lastErr, ErrUnknownTeam) {
			// Waiting for a resume would not help: say what to fix.
			return fmt.Errorf("linear sync: %d tasks not mirrored: %w", s.pending, s.lastErr)
		}
		why := "Linear has not answered yet"
		if s.lastErr != nil {
			why = s.lastErr.Error()
		}
		return fmt.Errorf("linear sync: %d tasks not yet mirrored (%s); they catch up on resume", s.pending, why)
	}
	return nil
}

// Close stops the background work.
func (s *Syncer) Close() error {
	if s == nil {
		return nil
	}
	s.once.Do(func() { close(s.done) })
	if s.stop != nil {
		s.stop()
		<-s.done
	}
	return nil
}

func (s *Syncer) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.loop(ctx)
}

// loop runs a pass on every kick, and after a failed pass again after a
// backoff that doubles up to MaxBackoff.
func (s *Syncer) loop(ctx context.Context) {
	defer close(s.done)
	backoff := s.o.MinBackoff
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-retry:
		}
		err := s.pass(ctx)
		s.mu.Lock()
		s.lastErr = err
		s.idle.Broadcast()
		s.mu.Unlock()
		if err == nil {
			backoff, retry = s.o.MinBackoff, nil
			continue
		}
		if ctx.Err() != nil {
			return
		}
		s.o.Logger.WarnContext(ctx, "linear sync failed; retrying", slog.Duration("in", backoff), slog.String("error", err.Error()))
		retry = time.After(backoff)
		backoff = min(2*backoff, s.o.MaxBackoff)
	}
}

// unsynced counts the tasks whose issue is missing or not in the state
// the task wants; the caller holds mu.
func (s *Syncer) unsynced() int {
	n := 0
	for k, t := range s.want {
		if st, ok := stateTypes[t.Status]; ok && s.synced[k] != s.states[st] || s.issues[k] == "" {
			n++
		}
	}
	return n
}

// pass brings every task's issue to its wanted state. A task whose issue
// is gone does not hold up the others: the first such failure is
// returned, for the retry, once every task was tried. Any other failure
// (Linear away, a rate limit) stops the pass at once.
func (s *Syncer) pass(ctx context.Context) (err error) {
	defer func() {
		s.mu.Lock()
		s.pending = s.unsynced()
		s.mu.Unlock()
	}()
	if err := s.loadStates(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	keys := make([]key, 0, len(s.want))
	for k := range s.want {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	slices.SortFunc(keys, func(a, b key) int {
		if a.run != b.run {
			return compare(a.run, b.run)
		}
		return compare(a.task, b.task)
	})
	var first error
	for _, k := range keys {
		if err := s.syncTask(ctx, k); err != nil {
			if !errors.Is(err, ErrNotFound) {
				return err // Linear is away or refuses: no other task fares better
			}
			if first == nil {
				first = err
			}
		}
	}
	return first
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *Syncer) loadStates(ctx context.Context) error {
	s.mu.Lock()
	have := s.states != nil
	s.mu.Unlock()
	if have {
		return nil
	}
	states, err := s.o.Client.TeamStates(ctx, s.o.TeamID)
	if err != nil {
		return err
	}
	// Of several states of a type, the first by position is the one a
	// task moves to (Linear's own default order).
	slices.SortStableFunc(states, func(a, b State) int {
		switch {
		case a.Position < b.Position:
			return -1
		case a.Position > b.Position:
			return 1
		}
		return 0
	})
	byType := map[string]string{}
	for _, st := range states {
		if _, ok := byType[st.Type]; !ok {
			byType[st.Type] = st.ID
		}
	}
	for _, typ := range stateTypes {
		if byType[typ] == "" {
			return fmt.Errorf("linear team %s has no workflow state of type %q", s.o.TeamID, typ)
		}
	}
	s.mu.Lock()
	s.states = byType
	s.mu.Unlock()
	return nil
}

// syncTask makes sure the task's issue exists (found again by its stable
// ID, or created) and is in the state its status maps to.
func (s *Syncer) syncTask(ctx context.Context, k key) error {
	s.mu.Lock()
	t := s.want[k]
	stateID := s.states[stateTypes[t.Status]]
	issueID, synced := s.issues[k], s.synced[k]
	projectReady := s.ready[k.run]
	s.mu.Unlock()
	if issueID != "" && (stateID == "" || synced == stateID) {
		return nil
	}
	projectID := ""
	if s.o.Project {
		projectID = StableID("project", k.run)
		if !projectReady {
			if err := s.ensureProject(ctx, projectID, k.run); err != nil {
				return err
			}
			s.mu.Lock()
			s.ready[k.run] = true
			s.mu.Unlock()
		}
	}
	if issueID == "" {
		id := StableID("issue", k.run, k.task)
		issue, err := s.o.Client.Issue(ctx, id)
		if errors.Is(err, ErrNotFound) {
			if stateID == "" {
				stateID = s.states["unstarted"]
			}
			issue, err = s.o.Client.CreateIssue(ctx, IssueInput{ID: id, TeamID: s.o.TeamID, Title: issueTitle(t), Description: t.UserStory, StateID: stateID, ProjectID: projectID})
		}
		if err != nil {
			return err
		}
		issueID, synced = issue.ID, issue.State.ID
		s.mu.Lock()
		s.issues[k], s.synced[k] = issueID, synced
		s.mu.Unlock()
	}
	if stateID == "" || synced == stateID {
		return nil
	}
	if err := s.o.Client.UpdateIssueState(ctx, issueID, stateID); err != nil {
		if errors.Is(err, ErrNotFound) {
			// Deleted in Linear meanwhile: the retry looks it up again by
			// its stable ID, and creates it when it is gone.
			s.mu.Lock()
			delete(s.issues, k)
			delete(s.synced, k)
			s.mu.Unlock()
		}
		return err
	}
	s.mu.Lock()
	s.synced[k] = stateID
	s.mu.Unlock()
	return nil
}

func (s *Syncer) ensureProject(ctx context.Context, id, runID string) error {
	err := s.o.Client.Project(ctx, id)
	if errors.Is(err, ErrNotFound) {
		err = s.o.Client.CreateProject(ctx, id, "taskloom run "+runID, []string{s.o.TeamID})
	}
	return err
}

// issueTitle is "ID: title".
func issueTitle(t planner.Task) string {
	return t.ID + ": " + t.Title
}

// Attach sets r.Sync to the Linear sync of cfg when it is on, and returns
// the Syncer for its owner to Close (nil when off). A sync that is on
// without its key is said once on warnings; the run goes on without it.
func Attach(r *nodes.Runner, cfg config.Config, warnings io.Writer, logger *slog.Logger) *Syncer {
	s, err := FromConfig(cfg, logger)
	if err != nil {
		fmt.Fprintf(warnings, "taskloom: warning: %v\n", err)
		return nil
	}
	if s != nil {
		r.Sync = s
	}
	return s
}
