package nodes

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph/checkpoint"
)

// Run statuses (SPEC §4, status --json).
const (
	RunRunning     = "running"
	RunInterrupted = "interrupted"
	RunCompleted   = "completed"
	RunFailed      = "failed"
	RunAborted     = "aborted"
)

var runStatuses = []string{RunRunning, RunInterrupted, RunCompleted, RunFailed, RunAborted}

var (
	// ErrRunNotFound means the store holds no such run.
	ErrRunNotFound = errors.New("run not found")
	// ErrRunExists means CreateRun was given the ID of a stored run.
	ErrRunExists = errors.New("run already exists")
)

// Run is a run's registry entry.
type Run struct {
	ID          string `json:"id"`
	ProductPath string `json:"product_path"`
	Repo        string `json:"repo"`
	// Status is one of running, interrupted, completed, failed, aborted.
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Meta is a JSON value; empty means {}.
	Meta json.RawMessage `json:"meta,omitempty"`
}

// StoreOpts configures a Store. Nil means defaults.
type StoreOpts struct {
	// NowFunc reads the clock; nil means time.Now.
	NowFunc func() time.Time
}

// Store is the run registry and the agents' history store of one database:
// the runs and agent_histories tables of the checkpoint saver's database,
// SQLite or PostgreSQL, or process memory next to a checkpoint.Memory. It
// is safe for concurrent use. Times are kept to the microsecond, in UTC.
type Store struct {
	now func() time.Time
	b   storeBackend
}

// storeBackend is one of the Store's databases. Times it is given are
// already in UTC and truncated to the microsecond.
type storeBackend interface {
	createRun(ctx context.Context, r Run) error
	setRunStatus(ctx context.Context, id, status string, now time.Time) error
	run(ctx context.Context, id string) (Run, error)
	// runs returns the runs of repo, or all runs when all is set, newest
	// first; limit > 0 keeps the first limit.
	runs(ctx context.Context, repo string, all bool, limit int) ([]Run, error)
	saveHistory(ctx context.Context, h historyRow) error
	loadHistory(ctx context.Context, runID, id string) (*agent.Record, error)
	// rootConversations returns the conversations without a parent of a
	// task, in no particular order.
	rootConversations(ctx context.Context, runID, taskID string) ([]string, error)
	close() error
}

// historyRow is a row of agent_histories.
type historyRow struct {
	runID, id, parentID, taskID string
	attempt                     int
	ui, api, meta               string
	updatedAt                   time.Time
}

// NewStore returns the Store over saver's database: a *checkpoint.SQLite
// or *checkpoint.Postgres (migrated), or an in-memory store for a
// *checkpoint.Memory. Other savers are an error.
func NewStore(saver checkpoint.Saver) (*Store, error) {
	return NewStoreWithOpts(saver, nil)
}

// NewStoreWithOpts is NewStore with options.
func NewStoreWithOpts(saver checkpoint.Saver, opts *StoreOpts) (*Store, error) {
	if opts == nil {
		opts = &StoreOpts{}
	}
	s := &Store{now: opts.NowFunc}
	if s.now == nil {
		s.now = time.Now
	}
	switch sv := saver.(type) {
	case *checkpoint.SQLite:
		s.b = &sqlBackend{w: sv.DB(), r: sv.ReadDB(), sqlite: true}
	case *checkpoint.Postgres:
		db := stdlib.OpenDBFromPool(sv.Pool())
		s.b = &retryBackend{b: &sqlBackend{w: db, r: db, own: db}, retry: sv.Retry}
	case *checkpoint.Memory:
		s.b = newMemBackend()
	case nil:
		return nil, errors.New("new run store: nil saver")
	default:
		return nil, fmt.Errorf("new run store: unsupported saver %T (want *checkpoint.SQLite, *checkpoint.Postgres or *checkpoint.Memory)", saver)
	}
	return s, nil
}

// Close releases the store's own resources. It does not close the saver,
// which must outlive the store.
func (s *Store) Close() error { return s.b.close() }

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
	if err := s.b.createRun(ctx, r); err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return nil
}

// SetRunStatus changes a run's status and sets its UpdatedAt to now.
func (s *Store) SetRunStatus(ctx context.Context, id, status string) error {
	if err := checkRunStatus(status); err != nil {
		return fmt.Errorf("set run %s status: %w", id, err)
	}
	if err := s.b.setRunStatus(ctx, id, status, s.clock()); err != nil {
		return fmt.Errorf("set run %s status: %w", id, err)
	}
	return nil
}

// Run returns run id, or an error wrapping ErrRunNotFound that names it.
func (s *Store) Run(ctx context.Context, id string) (Run, error) {
	r, err := s.b.run(ctx, id)
	if err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// Runs returns every run, newest first (by CreatedAt, then ID).
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	rs, err := s.b.runs(ctx, "", true, 0)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return rs, nil
}

// LatestRun returns the newest run on repo, or the newest of all when repo
// is "". None is an error wrapping ErrRunNotFound.
func (s *Store) LatestRun(ctx context.Context, repo string) (Run, error) {
	rs, err := s.b.runs(ctx, repo, repo == "", 1)
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
	ids, err := s.b.rootConversations(ctx, runID, taskID)
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
	row := historyRow{runID: h.runID, id: id, parentID: rec.Meta.ParentID, taskID: taskID, attempt: attempt, updatedAt: h.s.clock()}
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
	}{{&row.ui, ui}, {&row.api, api}, {&row.meta, rec.Meta}} {
		data, err := json.Marshal(f.v)
		if err != nil {
			return fmt.Errorf("save conversation %s: %w", id, err)
		}
		*f.dst = string(data)
	}
	if err := h.s.b.saveHistory(ctx, row); err != nil {
		return fmt.Errorf("save conversation %s: %w", id, err)
	}
	return nil
}

// Load implements agent.HistoryStore.
func (h *runHistories) Load(ctx context.Context, id string) (*agent.Record, error) {
	rec, err := h.s.b.loadHistory(ctx, h.runID, id)
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

// sqlBackend keeps the store in the runs and agent_histories tables.
type sqlBackend struct {
	w, r   *sql.DB // writes, reads (different pools on SQLite)
	sqlite bool
	own    *sql.DB // closed by close: the database/sql view of a pgx pool
}

// q returns query with its ? placeholders as $1, $2… for PostgreSQL.
func (b *sqlBackend) q(query string) string {
	if b.sqlite {
		return query
	}
	var sb strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			sb.WriteString("$" + strconv.Itoa(n))
			continue
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

// t binds a time: INTEGER microseconds on SQLite, timestamptz on
// PostgreSQL.
func (b *sqlBackend) t(t time.Time) any {
	if b.sqlite {
		return t.UnixMicro()
	}
	return t
}

// scanTime reads either column type of a time.
type scanTime struct{ t *time.Time }

func (s scanTime) Scan(src any) error {
	switch v := src.(type) {
	case int64:
		*s.t = time.UnixMicro(v).UTC()
	case time.Time:
		*s.t = v.UTC()
	default:
		return fmt.Errorf("scan time: unexpected %T", src)
	}
	return nil
}

func (b *sqlBackend) close() error {
	if b.own != nil {
		return b.own.Close()
	}
	return nil
}

const runColumns = `id, product_path, repo, status, created_at, updated_at, meta`

func (b *sqlBackend) createRun(ctx context.Context, r Run) error {
	res, err := b.w.ExecContext(ctx, b.q(`INSERT INTO runs (`+runColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`),
		r.ID, r.ProductPath, r.Repo, r.Status, b.t(r.CreatedAt), b.t(r.UpdatedAt), string(r.Meta))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return ErrRunExists
	}
	return nil
}

func (b *sqlBackend) setRunStatus(ctx context.Context, id, status string, now time.Time) error {
	res, err := b.w.ExecContext(ctx, b.q(`UPDATE runs SET status = ?, updated_at = ? WHERE id = ?`), status, b.t(now), id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return ErrRunNotFound
	}
	return nil
}

func scanRun(sc interface{ Scan(...any) error }) (Run, error) {
	var r Run
	var meta string
	if err := sc.Scan(&r.ID, &r.ProductPath, &r.Repo, &r.Status, scanTime{&r.CreatedAt}, scanTime{&r.UpdatedAt}, &meta); err != nil {
		return Run{}, err
	}
	r.Meta = json.RawMessage(meta)
	return r, nil
}

func (b *sqlBackend) run(ctx context.Context, id string) (Run, error) {
	r, err := scanRun(b.r.QueryRowContext(ctx, b.q(`SELECT `+runColumns+` FROM runs WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, ErrRunNotFound
	}
	return r, err
}

func (b *sqlBackend) runs(ctx context.Context, repo string, all bool, limit int) ([]Run, error) {
	query := `SELECT ` + runColumns + ` FROM runs`
	var args []any
	if !all {
		query += ` WHERE repo = ?`
		args = append(args, repo)
	}
	query += ` ORDER BY created_at DESC, id DESC`
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := b.r.QueryContext(ctx, b.q(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (b *sqlBackend) saveHistory(ctx context.Context, h historyRow) error {
	var parent any
	if h.parentID != "" {
		parent = h.parentID
	}
	_, err := b.w.ExecContext(ctx, b.q(`INSERT INTO agent_histories
		(run_id, conversation_id, parent_id, task_id, attempt, ui, api, meta, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, conversation_id) DO UPDATE SET
			parent_id = excluded.parent_id, task_id = excluded.task_id, attempt = excluded.attempt,
			ui = excluded.ui, api = excluded.api, meta = excluded.meta, updated_at = excluded.updated_at`),
		h.runID, h.id, parent, h.taskID, h.attempt, h.ui, h.api, h.meta, b.t(h.updatedAt))
	return err
}

func (b *sqlBackend) loadHistory(ctx context.Context, runID, id string) (*agent.Record, error) {
	var ui, api, meta string
	err := b.r.QueryRowContext(ctx, b.q(`SELECT ui, api, meta FROM agent_histories WHERE run_id = ? AND conversation_id = ?`), runID, id).
		Scan(&ui, &api, &meta)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agent.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return decodeHistory(ui, api, meta)
}

func (b *sqlBackend) rootConversations(ctx context.Context, runID, taskID string) ([]string, error) {
	rows, err := b.r.QueryContext(ctx, b.q(`SELECT conversation_id FROM agent_histories
		WHERE run_id = ? AND task_id = ? AND parent_id IS NULL`), runID, taskID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// retryBackend retries a backend's operations as its saver retries its
// own: while the server does not answer, for up to the saver's retry
// period.
type retryBackend struct {
	b     storeBackend
	retry func(ctx context.Context, op string, fn func(ctx context.Context) error) error
}

func (r *retryBackend) close() error { return r.b.close() }

// createRun treats a run that exists after a failed try as its own when it
// is the run it was creating: the try committed, and only its answer was
// lost.
func (r *retryBackend) createRun(ctx context.Context, run Run) error {
	tries := 0
	return r.retry(ctx, "create run", func(ctx context.Context) error {
		tries++
		err := r.b.createRun(ctx, run)
		if !errors.Is(err, ErrRunExists) || tries == 1 {
			return err
		}
		got, gerr := r.b.run(ctx, run.ID)
		if gerr != nil {
			return gerr
		}
		if got.CreatedAt.Equal(run.CreatedAt) && got.ProductPath == run.ProductPath && got.Repo == run.Repo {
			return nil
		}
		return err
	})
}

func (r *retryBackend) setRunStatus(ctx context.Context, id, status string, now time.Time) error {
	return r.retry(ctx, "set run status", func(ctx context.Context) error { return r.b.setRunStatus(ctx, id, status, now) })
}

func (r *retryBackend) run(ctx context.Context, id string) (Run, error) {
	var out Run
	err := r.retry(ctx, "get run", func(ctx context.Context) error {
		var err error
		out, err = r.b.run(ctx, id)
		return err
	})
	return out, err
}

func (r *retryBackend) runs(ctx context.Context, repo string, all bool, limit int) ([]Run, error) {
	var out []Run
	err := r.retry(ctx, "list runs", func(ctx context.Context) error {
		var err error
		out, err = r.b.runs(ctx, repo, all, limit)
		return err
	})
	return out, err
}

func (r *retryBackend) saveHistory(ctx context.Context, h historyRow) error {
	return r.retry(ctx, "save history", func(ctx context.Context) error { return r.b.saveHistory(ctx, h) })
}

func (r *retryBackend) loadHistory(ctx context.Context, runID, id string) (*agent.Record, error) {
	var out *agent.Record
	err := r.retry(ctx, "load history", func(ctx context.Context) error {
		var err error
		out, err = r.b.loadHistory(ctx, runID, id)
		return err
	})
	return out, err
}

func (r *retryBackend) rootConversations(ctx context.Context, runID, taskID string) ([]string, error) {
	var out []string
	err := r.retry(ctx, "list conversations", func(ctx context.Context) error {
		var err error
		out, err = r.b.rootConversations(ctx, runID, taskID)
		return err
	})
	return out, err
}

// memBackend keeps the store in process memory.
type memBackend struct {
	mu        sync.Mutex
	runsByID  map[string]Run
	histories map[[2]string]historyRow // by run ID and conversation ID
}

func newMemBackend() *memBackend {
	return &memBackend{runsByID: map[string]Run{}, histories: map[[2]string]historyRow{}}
}

func (m *memBackend) close() error { return nil }

func (m *memBackend) createRun(_ context.Context, r Run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.runsByID[r.ID]; ok {
		return ErrRunExists
	}
	m.runsByID[r.ID] = r
	return nil
}

func (m *memBackend) setRunStatus(_ context.Context, id, status string, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runsByID[id]
	if !ok {
		return ErrRunNotFound
	}
	r.Status, r.UpdatedAt = status, now
	m.runsByID[id] = r
	return nil
}

func cloneRun(r Run) Run {
	r.Meta = slices.Clone(r.Meta)
	return r
}

func (m *memBackend) run(_ context.Context, id string) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runsByID[id]
	if !ok {
		return Run{}, ErrRunNotFound
	}
	return cloneRun(r), nil
}

func (m *memBackend) runs(_ context.Context, repo string, all bool, limit int) ([]Run, error) {
	m.mu.Lock()
	var out []Run
	for _, r := range m.runsByID {
		if all || r.Repo == repo {
			out = append(out, cloneRun(r))
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.After(out[j].CreatedAt)
		}
		return out[i].ID > out[j].ID
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (m *memBackend) saveHistory(_ context.Context, h historyRow) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.histories[[2]string{h.runID, h.id}] = h
	return nil
}

func (m *memBackend) loadHistory(_ context.Context, runID, id string) (*agent.Record, error) {
	m.mu.Lock()
	h, ok := m.histories[[2]string{runID, id}]
	m.mu.Unlock()
	if !ok {
		return nil, agent.ErrNotFound
	}
	return decodeHistory(h.ui, h.api, h.meta)
}

func (m *memBackend) rootConversations(_ context.Context, runID, taskID string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k, h := range m.histories {
		if k[0] == runID && h.taskID == taskID && h.parentID == "" {
			out = append(out, h.id)
		}
	}
	return out, nil
}
