package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/taskloom/taskloom/store"
)

// SQLite keeps times as INTEGER microseconds since the Unix epoch.

const runColumns = `id, product_path, repo, status, created_at, updated_at, meta`

// CreateRun implements store.Records.
func (s *Driver) CreateRun(ctx context.Context, r store.Run) error {
	res, err := s.w.ExecContext(ctx, `INSERT INTO runs (`+runColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		r.ID, r.ProductPath, r.Repo, r.Status, micros(r.CreatedAt), micros(r.UpdatedAt), string(r.Meta))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return store.ErrRunExists
	}
	return nil
}

// SetRunStatus implements store.Records.
func (s *Driver) SetRunStatus(ctx context.Context, id, status string, updatedAt time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE runs SET status = ?, updated_at = ? WHERE id = ?`, status, micros(updatedAt), id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return store.ErrRunNotFound
	}
	return nil
}

func scanRun(sc interface{ Scan(...any) error }) (store.Run, error) {
	var (
		r        store.Run
		meta     string
		cat, uat int64
	)
	if err := sc.Scan(&r.ID, &r.ProductPath, &r.Repo, &r.Status, &cat, &uat, &meta); err != nil {
		return store.Run{}, err
	}
	r.CreatedAt, r.UpdatedAt, r.Meta = fromMicros(cat), fromMicros(uat), json.RawMessage(meta)
	return r, nil
}

// GetRun implements store.Records.
func (s *Driver) GetRun(ctx context.Context, id string) (store.Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, store.ErrRunNotFound
	}
	return r, noSchema(err)
}

// noSchema marks the error of a query on a database that has no taskloom
// tables (one opened without migrating) as store.ErrNoSchema.
func noSchema(err error) error {
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return fmt.Errorf("%w: %w", store.ErrNoSchema, err)
	}
	return err
}

// ListRuns implements store.Records.
func (s *Driver) ListRuns(ctx context.Context, params store.ListRunsParams) ([]store.Run, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = -1
	}
	query, args := `SELECT `+runColumns+` FROM runs ORDER BY created_at DESC, id DESC LIMIT ?`, []any{limit}
	if params.Repo != "" {
		query = `SELECT ` + runColumns + ` FROM runs WHERE repo = ? ORDER BY created_at DESC, id DESC LIMIT ?`
		args = []any{params.Repo, limit}
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, noSchema(err)
	}
	defer func() { _ = rows.Close() }()
	var out []store.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// SaveHistory implements store.Records.
func (s *Driver) SaveHistory(ctx context.Context, h store.History) error {
	var parent any
	if h.ParentID != "" {
		parent = h.ParentID
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO agent_histories
		(run_id, conversation_id, parent_id, task_id, attempt, ui, api, meta, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, conversation_id) DO UPDATE SET
			parent_id = excluded.parent_id, task_id = excluded.task_id, attempt = excluded.attempt,
			ui = excluded.ui, api = excluded.api, meta = excluded.meta, updated_at = excluded.updated_at`,
		h.RunID, h.ConversationID, parent, h.TaskID, h.Attempt, h.UI, h.API, h.Meta, micros(h.UpdatedAt))
	return err
}

// GetHistory implements store.Records.
func (s *Driver) GetHistory(ctx context.Context, runID, conversationID string) (store.History, error) {
	h := store.History{RunID: runID, ConversationID: conversationID}
	var (
		parent sql.NullString
		at     int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT parent_id, task_id, attempt, ui, api, meta, updated_at FROM agent_histories
		WHERE run_id = ? AND conversation_id = ?`, runID, conversationID).
		Scan(&parent, &h.TaskID, &h.Attempt, &h.UI, &h.API, &h.Meta, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return store.History{}, store.ErrNotFound
	}
	if err != nil {
		return store.History{}, err
	}
	h.ParentID, h.UpdatedAt = parent.String, fromMicros(at)
	return h, nil
}

// RootConversations implements store.Records.
func (s *Driver) RootConversations(ctx context.Context, runID, taskID string) ([]string, error) {
	return s.strings(ctx, `SELECT conversation_id FROM agent_histories
		WHERE run_id = ? AND task_id = ? AND parent_id IS NULL`, runID, taskID)
}

// AttemptMetas implements store.Records.
func (s *Driver) AttemptMetas(ctx context.Context, runID, taskID string, attempt int) ([]string, error) {
	return s.strings(ctx, `SELECT meta FROM agent_histories
		WHERE run_id = ? AND task_id = ? AND attempt = ? AND parent_id IS NULL`, runID, taskID, attempt)
}

// strings runs a query of one text column and returns its values.
func (s *Driver) strings(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
