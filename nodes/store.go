package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/store"
)

// Run statuses.
const (
	RunRunning     = "running"
	RunInterrupted = "interrupted" // stopped (Ctrl-C, a lost store); resumable
	RunPaused      = "paused"      // waiting for a human review
	RunCompleted   = "completed"
	RunPartial     = "partial" // ended with tasks skipped or blocked
	RunFailed      = "failed"
	RunAborted     = "aborted"
)

var runStatuses = []string{RunRunning, RunInterrupted, RunPaused, RunCompleted, RunPartial, RunFailed, RunAborted}

// LiveStatus is run's status as its thread's lease shows it at now: th is
// the run's thread, ok whether it has one. A run whose lease a process
// holds is running, whatever was recorded (a resume or a review --resume
// drives it). A run recorded as running whose lease was released or lapsed
// is interrupted: its process stopped without saying so (it was killed,
// say), and it can be resumed. A run whose thread has not started is
// still starting, as recorded.
func LiveStatus(run Run, th checkpoint.ThreadInfo, ok bool, now time.Time) string {
	// A holder on this machine whose process is gone (kill -9) holds
	// nothing, though its lease has not lapsed yet.
	held := ok && th.Holder != "" && !th.Expires.Before(now) && graph.HolderAlive(th.Holder)
	switch {
	case held:
		return RunRunning
	case run.Status == RunRunning && ok:
		return RunInterrupted
	}
	return run.Status
}

var (
	// ErrRunNotFound means the store holds no such run.
	ErrRunNotFound = store.ErrRunNotFound
	// ErrRunExists means CreateRun was given the ID of a stored run.
	ErrRunExists = store.ErrRunExists
)

// Run is a run's registry entry.
type Run = store.Run

// StoreOpts configures a Store. Nil means defaults.
type StoreOpts struct {
	// NowFunc reads the clock; nil means time.Now.
	NowFunc func() time.Time
}

// Store is the run registry and the agents' history store of one
// database: the records (store.Records) of the driver that also holds the
// runs' checkpoints, SQLite, PostgreSQL or memory. It is safe for
// concurrent use. Times are kept to the microsecond, in UTC.
type Store struct {
	now func() time.Time
	r   store.Records
}

// NewStore returns the Store over a driver's records.
func NewStore(records store.Records) (*Store, error) {
	return NewStoreWithOpts(records, nil)
}

// NewStoreWithOpts is NewStore with options.
func NewStoreWithOpts(records store.Records, opts *StoreOpts) (*Store, error) {
	if opts == nil {
		opts = &StoreOpts{}
	}
	if records == nil {
		return nil, errors.New("new run store: nil records")
	}
	s := &Store{now: opts.NowFunc, r: records}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// Close does nothing: the store holds no resources of its own, and the
// driver it reads, which must outlive it, is closed by its owner.
func (s *Store) Close() error { return nil }

func (s *Store) clock() time.Time { return storeTime(s.now()) }

func storeTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func checkRunStatus(status string) error {
	if !slices.Contains(runStatuses, status) {
		return fmt.Errorf("run status must be one of %s, got %q", strings.Join(runStatuses, ", "), status)
	}
	return nil
}

// CreateRun stores a new run. An empty Status means running, zero times
// mean now (UpdatedAt defaults to CreatedAt) and empty Meta means {}. A
// run with the same ID is ErrRunExists.
func (s *Store) CreateRun(ctx context.Context, r Run) error {
	if r.ID == "" {
		return errors.New("create run: empty id")
	}
	if r.Status == "" {
		r.Status = RunRunning
	}
	if err := checkRunStatus(r.Status); err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	if len(r.Meta) == 0 {
		r.Meta = json.RawMessage("{}")
	} else if !json.Valid(r.Meta) {
		return fmt.Errorf("create run %s: meta is not valid JSON", r.ID)
	}
	r.Meta = slices.Clone(r.Meta)
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	r.CreatedAt, r.UpdatedAt = storeTime(r.CreatedAt), storeTime(r.UpdatedAt)
	if err := s.r.CreateRun(ctx, r); err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return nil
}

// SetRunStatus changes a run's status and sets its UpdatedAt to now.
func (s *Store) SetRunStatus(ctx context.Context, id, status string) error {
	if err := checkRunStatus(status); err != nil {
		return fmt.Errorf("set run %s status: %w", id, err)
	}
	if err := s.r.SetRunStatus(ctx, id, status, s.clock()); err != nil {
		return fmt.Errorf("set run %s status: %w", id, err)
	}
	return nil
}

// Run returns run id, or an error wrapping ErrRunNotFound that names it.
func (s *Store) Run(ctx context.Context, id string) (Run, error) {
	r, err := s.r.GetRun(ctx, id)
	if err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// Runs returns every run, newest first (by CreatedAt, then ID).
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	rs, err := s.r.ListRuns(ctx, store.ListRunsParams{})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return rs, nil
}

// LatestRun returns the newest run on repo, or the newest of all when repo
// is "". None is an error wrapping ErrRunNotFound.
func (s *Store) LatestRun(ctx context.Context, repo string) (Run, error) {
	rs, err := s.r.ListRuns(ctx, store.ListRunsParams{Repo: repo, Limit: 1})
	if err != nil {
		return Run{}, fmt.Errorf("latest run of %q: %w", repo, err)
	}
	if len(rs) == 0 {
		if repo == "" {
			return Run{}, fmt.Errorf("latest run: no runs: %w", ErrRunNotFound)
		}
		return Run{}, fmt.Errorf("latest run: no runs on %s: %w", repo, ErrRunNotFound)
	}
	return rs[0], nil
}

// Histories returns the history store of run runID's agent conversations.
// Each Save is one statement (an upsert of the whole record), so a reader
// sees the old record or the new one. Conversation IDs must be run runID's:
// a record's root conversation (Meta.RootID, or its ID) is
// RUN_ID/TASK_ID/ATTEMPT[/iN] (agent.ConversationID), which gives the task
// and attempt that Conversations finds it by.
func (s *Store) Histories(runID string) agent.HistoryStore {
	return &runHistories{s: s, runID: runID}
}

// Conversations returns the IDs of task taskID's root conversations in run
// runID, one per attempt (and Ralph iteration), ordered by attempt and then
// iteration. Subtasks are left out: they are their root's Meta.ChildIDs,
// which agent.Export follows.
func (s *Store) Conversations(ctx context.Context, runID, taskID string) ([]string, error) {
	ids, err := s.r.RootConversations(ctx, runID, taskID)
	if err != nil {
		return nil, fmt.Errorf("conversations of run %s task %s: %w", runID, taskID, err)
	}
	type key struct {
		id                 string
		attempt, iteration int
	}
	keys := make([]key, 0, len(ids))
	for _, id := range ids {
		_, a, it, err := ParseConversationID(runID, id)
		if err != nil {
			return nil, fmt.Errorf("conversations of run %s task %s: %w", runID, taskID, err)
		}
		keys = append(keys, key{id, a, it})
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].attempt != keys[j].attempt {
			return keys[i].attempt < keys[j].attempt
		}
		if keys[i].iteration != keys[j].iteration {
			return keys[i].iteration < keys[j].iteration
		}
		return keys[i].id < keys[j].id
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.id
	}
	return out, nil
}

// UnendedUsage is what the attempts of st that have not ended used so far.
// Such an attempt (its worker still talks, or its process was killed) has
// no record in st yet, but its conversations are stored as they go.
func (s *Store) UnendedUsage(ctx context.Context, runID string, st State) (llm.Usage, error) {
	var total llm.Usage
	for _, t := range st.Tasks.Values() {
		if t.Status != planner.StatusInProgress {
			continue
		}
		n := CurrentAttempt(st, t.ID)
		if _, ended := st.Attempts.Get(attemptKey(t.ID, n)); ended {
			continue
		}
		// Only the metadata is read: a page polls this, and the
		// conversations themselves grow long.
		metas, err := s.r.AttemptMetas(ctx, runID, t.ID, n)
		if err != nil {
			return total, fmt.Errorf("usage of run %s task %s attempt %d: %w", runID, t.ID, n, err)
		}
		for _, m := range metas {
			var meta agent.Metadata
			if err := json.Unmarshal([]byte(m), &meta); err != nil {
				return total, fmt.Errorf("usage of run %s task %s attempt %d: decode metadata: %w", runID, t.ID, n, err)
			}
			total = total.Add(meta.TreeUsage().LLM())
		}
	}
	return total, nil
}

// ParseConversationID splits a conversation ID of run runID, as
// agent.ConversationID makes it (RUN_ID/TASK_ID/ATTEMPT, with /iN for the
// N-th Ralph iteration), into its task, attempt and iteration (0 when
// absent). A subtask's suffix (".1", ".1.2"…) is ignored.
func ParseConversationID(runID, id string) (taskID string, attempt, iteration int, err error) {
	bad := func() (string, int, int, error) {
		return "", 0, 0, fmt.Errorf("conversation id %q is not %s/TASK_ID/ATTEMPT[/iN]", id, runID)
	}
	rest, ok := strings.CutPrefix(id, runID+"/")
	if !ok || runID == "" {
		return bad()
	}
	parts := strings.Split(rest, "/")
	last := len(parts) - 1
	if i := strings.IndexByte(parts[last], '.'); i >= 0 {
		parts[last] = parts[last][:i]
	}
	if n, ok := strings.CutPrefix(parts[last], "i"); ok {
		it, err := strconv.Atoi(n)
		if err != nil || it < 1 || n[0] == '+' {
			return bad()
		}
		iteration = it
		parts, last = parts[:last], last-1
	}
	if last < 1 {
		return bad()
	}
	attempt, err = strconv.Atoi(parts[last])
	if err != nil || attempt < 1 || parts[last][0] == '+' {
		return bad()
	}
	taskID = strings.Join(parts[:last], "/")
	if taskID == "" {
		return bad()
	}
	return taskID, attempt, iteration, nil
}

// runHistories is the agent.HistoryStore of one run.
type runHistories struct {
	s     *Store
	runID string
}

var _ agent.HistoryStore = (*runHistories)(nil)

// Save implements agent.HistoryStore.
func (h *runHistories) Save(ctx context.Context, rec *agent.Record) error {
	if rec == nil || rec.Meta.ID == "" {
		return errors.New("save conversation: empty id")
	}
	id := rec.Meta.ID
	root := rec.Meta.RootID
	if root == "" {
		root = id
	}
	taskID, attempt, _, err := ParseConversationID(h.runID, root)
	if err != nil {
		return fmt.Errorf("save conversation %s: %w", id, err)
	}
	row := store.History{RunID: h.runID, ConversationID: id, ParentID: rec.Meta.ParentID, TaskID: taskID, Attempt: attempt, UpdatedAt: h.s.clock()}
	ui, api := rec.UI, rec.API
	if ui == nil {
		ui = []agent.UIMessage{}
	}
	if api == nil {
		api = []agent.APIMessage{}
	}
	for _, f := range []struct {
		dst *string
		v   any
	}{{&row.UI, ui}, {&row.API, api}, {&row.Meta, rec.Meta}} {
		data, err := json.Marshal(f.v)
		if err != nil {
			return fmt.Errorf("save conversation %s: %w", id, err)
		}
		*f.dst = string(data)
	}
	if err := h.s.r.SaveHistory(ctx, row); err != nil {
		return fmt.Errorf("save conversation %s: %w", id, err)
	}
	return nil
}

// Load implements agent.HistoryStore.
func (h *runHistories) Load(ctx context.Context, id string) (*agent.Record, error) {
	row, err := h.s.r.GetHistory(ctx, h.runID, id)
	if errors.Is(err, store.ErrNotFound) {
		err = agent.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load conversation %s: %w", id, err)
	}
	rec, err := decodeHistory(row.UI, row.API, row.Meta)
	if err != nil {
		return nil, fmt.Errorf("load conversation %s: %w", id, err)
	}
	return rec, nil
}

func decodeHistory(ui, api, meta string) (*agent.Record, error) {
	var rec agent.Record
	if err := json.Unmarshal([]byte(meta), &rec.Meta); err != nil {
		return nil, fmt.Errorf("decode metadata: %w", err)
	}
	if err := json.Unmarshal([]byte(ui), &rec.UI); err != nil {
		return nil, fmt.Errorf("decode ui messages: %w", err)
	}
	if err := json.Unmarshal([]byte(api), &rec.API); err != nil {
		return nil, fmt.Errorf("decode api history: %w", err)
	}
	return &rec, nil
}
