package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/taskloom/taskloom/store"
)

// Every operation on the records runs through the driver's retrier, as the
// saver's own do, and each is safe to run again.

// recordsErr translates what pgx reports: no rows is notFound, a missing
// table (SQLSTATE 42P01, a database never migrated) store.ErrNoSchema.
func recordsErr(err, notFound error) error {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return notFound
	case errors.As(err, &pgErr) && pgErr.Code == "42P01":
		return fmt.Errorf("%w: %w", store.ErrNoSchema, err)
	}
	return err
}

const runColumns = `id, product_path, repo, status, created_at, updated_at, meta`

// CreateRun implements store.Records. When a try fails after the server
// may have committed it, the retry finds the run; it is taken as its own
// when it is the run it was creating.
func (p *Driver) CreateRun(ctx context.Context, r store.Run) error {
	tries := 0
	return p.retry.Do(ctx, "create run", func(ctx context.Context) error {
		tries++
		return p.createRun(ctx, r, tries > 1)
	})
}

// createRun tries CreateRun once; retried says that an earlier try may
// have committed.
func (p *Driver) createRun(ctx context.Context, r store.Run, retried bool) error {
	tag, err := p.pool.Exec(ctx, `INSERT INTO runs (`+runColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`,
		r.ID, r.ProductPath, r.Repo, r.Status, r.CreatedAt, r.UpdatedAt, string(r.Meta))
	if err != nil {
		return recordsErr(err, nil)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if retried {
		got, err := p.getRun(ctx, r.ID)
		if err != nil {
			return err
		}
		if got.CreatedAt.Equal(r.CreatedAt) && got.ProductPath == r.ProductPath && got.Repo == r.Repo {
			return nil
		}
	}
	return store.ErrRunExists
}

// SetRunStatus implements store.Records.
func (p *Driver) SetRunStatus(ctx context.Context, id, status string, updatedAt time.Time) error {
	return p.retry.Do(ctx, "set run status", func(ctx context.Context) error {
		tag, err := p.pool.Exec(ctx, `UPDATE runs SET status = $1, updated_at = $2 WHERE id = $3`, status, updatedAt, id)
		if err != nil {
			return recordsErr(err, nil)
		}
		if tag.RowsAffected() == 0 {
			return store.ErrRunNotFound
		}
		return nil
	})
}

func scanRun(row pgx.Row) (store.Run, error) {
	var (
		r    store.Run
		meta string
	)
	if err := row.Scan(&r.ID, &r.ProductPath, &r.Repo, &r.Status, &r.CreatedAt, &r.UpdatedAt, &meta); err != nil {
		return store.Run{}, err
	}
	r.CreatedAt, r.UpdatedAt, r.Meta = r.CreatedAt.UTC(), r.UpdatedAt.UTC(), json.RawMessage(meta)
	return r, nil
}

func (p *Driver) getRun(ctx context.Context, id string) (store.Run, error) {
	r, err := scanRun(p.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = $1`, id))
	return r, recordsErr(err, store.ErrRunNotFound)
}

// GetRun implements store.Records.
func (p *Driver) GetRun(ctx context.Context, id string) (store.Run, error) {
	var out store.Run
	err := p.retry.Do(ctx, "get run", func(ctx context.Context) error {
		var err error
		out, err = p.getRun(ctx, id)
		return err
	})
	return out, err
}

// ListRuns implements store.Records.
func (p *Driver) ListRuns(ctx context.Context, params store.ListRunsParams) ([]store.Run, error) {
	var limit *int
	if params.Limit > 0 {
		limit = &params.Limit
	}
	query, args := `SELECT `+runColumns+` FROM runs ORDER BY created_at DESC, id DESC LIMIT $1`, []any{limit}
	if params.Repo != "" {
		query = `SELECT ` + runColumns + ` FROM runs WHERE repo = $2 ORDER BY created_at DESC, id DESC LIMIT $1`
		args = append(args, params.Repo)
	}
	var out []store.Run
	err := p.retry.Do(ctx, "list runs", func(ctx context.Context) error {
		out = nil
		rows, err := p.pool.Query(ctx, query, args...)
		if err != nil {
			return recordsErr(err, nil)
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanRun(rows)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return recordsErr(rows.Err(), nil)
	})
	return out, err
}

// SaveHistory implements store.Records.
func (p *Driver) SaveHistory(ctx context.Context, h store.History) error {
	var parent *string
	if h.ParentID != "" {
		parent = &h.ParentID
	}
	return p.retry.Do(ctx, "save history", func(ctx context.Context) error {
		_, err := p.pool.Exec(ctx, `INSERT INTO agent_histories
			(run_id, conversation_id, parent_id, task_id, attempt, ui, api, meta, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (run_id, conversation_id) DO UPDATE SET
				parent_id = excluded.parent_id, task_id = excluded.task_id, attempt = excluded.attempt,
				ui = excluded.ui, api = excluded.api, meta = excluded.meta, updated_at = excluded.updated_at`,
			h.RunID, h.ConversationID, parent, h.TaskID, h.Attempt, h.UI, h.API, h.Meta, h.UpdatedAt)
		return recordsErr(err, nil)
	})
}

// GetHistory implements store.Records.
func (p *Driver) GetHistory(ctx context.Context, runID, conversationID string) (store.History, error) {
	var out store.History
	err := p.retry.Do(ctx, "load history", func(ctx context.Context) error {
		h := store.History{RunID: runID, ConversationID: conversationID}
		var parent *string
		err := p.pool.QueryRow(ctx, `SELECT parent_id, task_id, attempt, ui, api, meta, updated_at FROM agent_histories
			WHERE run_id = $1 AND conversation_id = $2`, runID, conversationID).
			Scan(&parent, &h.TaskID, &h.Attempt, &h.UI, &h.API, &h.Meta, &h.UpdatedAt)
		if err != nil {
			return recordsErr(err, store.ErrNotFound)
		}
		if parent != nil {
			h.ParentID = *parent
		}
		h.UpdatedAt = h.UpdatedAt.UTC()
		out = h
		return nil
	})
	return out, err
}

// RootConversations implements store.Records.
func (p *Driver) RootConversations(ctx context.Context, runID, taskID string) ([]string, error) {
	return p.strings(ctx, "list conversations", `SELECT conversation_id FROM agent_histories
		WHERE run_id = $1 AND task_id = $2 AND parent_id IS NULL`, runID, taskID)
}

// AttemptMetas implements store.Records.
func (p *Driver) AttemptMetas(ctx context.Context, runID, taskID string, attempt int) ([]string, error) {
	return p.strings(ctx, "read conversation metadata", `SELECT meta FROM agent_histories
		WHERE run_id = $1 AND task_id = $2 AND attempt = $3 AND parent_id IS NULL`, runID, taskID, attempt)
}

// strings runs a query of one text column, retried as what, and returns
// its values.
func (p *Driver) strings(ctx context.Context, what, query string, args ...any) ([]string, error) {
	var out []string
	err := p.retry.Do(ctx, what, func(ctx context.Context) error {
		rows, err := p.pool.Query(ctx, query, args...)
		if err != nil {
			return recordsErr(err, nil)
		}
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return recordsErr(err, nil)
	})
	return out, err
}
