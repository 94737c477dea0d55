package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskloom/taskloom/migrations"
)

var _ Saver = (*Postgres)(nil)

// PostgresOpts configures a PostgreSQL saver. Nil means defaults.
type PostgresOpts struct {
	// Logger receives the migrations applied on open. Nil discards them.
	Logger *slog.Logger
	// SkipMigrate leaves the schema as it is.
	SkipMigrate bool
}

// Postgres is a Saver that stores checkpoints in PostgreSQL, in the current
// schema of its pool's connections (set search_path in the URL to choose
// another). Put is a single statement: one round trip and one commit.
// Times are stored to the microsecond.
type Postgres struct {
	pool    *pgxpool.Pool
	ownPool bool
	mig     *migrations.Migrator
}

// NewPostgres returns a saver on pool and applies the migrations. Close
// does not close a pool passed in here.
func NewPostgres(ctx context.Context, pool *pgxpool.Pool, opts *PostgresOpts) (*Postgres, error) {
	if opts == nil {
		opts = &PostgresOpts{}
	}
	mig, err := migrations.NewPostgres(pool, &migrations.Opts{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	p := &Postgres{pool: pool, mig: mig}
	if !opts.SkipMigrate {
		if _, err := mig.Migrate(ctx, migrations.Up, nil); err != nil {
			return nil, fmt.Errorf("postgres: migrate: %w", err)
		}
	}
	return p, nil
}

// OpenPostgres connects to the database at url, checks that it answers and
// returns a saver that owns the connection pool.
func OpenPostgres(ctx context.Context, url string, opts *PostgresOpts) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL %s: %w", MaskURL(url), maskErr(err, url))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", MaskURL(url), maskErr(err, url))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", MaskURL(url), maskErr(err, url))
	}
	p, err := NewPostgres(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	p.ownPool = true
	return p, nil
}

// Pool returns the connection pool, for storing other records in the same
// database.
func (p *Postgres) Pool() *pgxpool.Pool { return p.pool }

// Migrator returns the migrator of the database.
func (p *Postgres) Migrator() *migrations.Migrator { return p.mig }

// Migrate applies the pending migrations.
func (p *Postgres) Migrate(ctx context.Context) (*migrations.Result, error) {
	return p.mig.Migrate(ctx, migrations.Up, nil)
}

// Close implements Saver. It closes the pool only when OpenPostgres made it.
func (p *Postgres) Close() error {
	if p.ownPool {
		p.pool.Close()
	}
	return nil
}

func pgErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return wrapStoreErr("postgres", err)
}

// Acquire implements Saver.
func (p *Postgres) Acquire(ctx context.Context, threadID, holder string, now time.Time, ttl time.Duration) (Lease, error) {
	expires := now.Add(ttl)
	for range 3 {
		var token int64
		// One statement: create the thread, or take its lease unless another
		// holder's is live. The token grows unless the same holder renews a
		// live lease.
		err := p.pool.QueryRow(ctx, `INSERT INTO threads AS t
				(thread_id, head, lease_holder, lease_token, lease_expires, ttl_us, created_at, updated_at)
			VALUES ($1, -1, $2, 1, $3, $4, $5, $5)
			ON CONFLICT (thread_id) DO UPDATE SET
				lease_token = CASE
					WHEN t.lease_holder IS NULL OR t.lease_holder <> excluded.lease_holder OR t.lease_expires <= $5
					THEN t.lease_token + 1 ELSE t.lease_token END,
				lease_holder = excluded.lease_holder,
				lease_expires = excluded.lease_expires,
				ttl_us = excluded.ttl_us
			WHERE t.lease_holder IS NULL OR t.lease_holder = excluded.lease_holder OR t.lease_expires <= $5
			RETURNING lease_token`,
			threadID, holder, expires, ttl.Microseconds(), now).Scan(&token)
		if err == nil {
			return Lease{ThreadID: threadID, Holder: holder, Token: token, Expires: expires}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Lease{}, fmt.Errorf("acquire %s: %w", threadID, pgErr(err))
		}
		// Another holder's lease looked live; report it, unless it was
		// released or expired in the meantime.
		var (
			cur *string
			exp time.Time
		)
		err = p.pool.QueryRow(ctx, `SELECT lease_holder, lease_expires FROM threads WHERE thread_id = $1`, threadID).Scan(&cur, &exp)
		if err != nil {
			return Lease{}, fmt.Errorf("acquire %s: %w", threadID, pgErr(err))
		}
		if cur != nil && *cur != holder && now.Before(exp) {
			return Lease{}, &BusyError{ThreadID: threadID, Holder: *cur, Expires: exp}
		}
	}
	return Lease{}, fmt.Errorf("acquire %s: lease kept changing hands", threadID)
}

// Release implements Saver.
func (p *Postgres) Release(ctx context.Context, lease Lease) error {
	_, err := p.pool.Exec(ctx, `UPDATE threads SET lease_holder = NULL
		WHERE thread_id = $1 AND lease_token = $2 AND lease_holder IS NOT NULL`, lease.ThreadID, lease.Token)
	if err != nil {
		return fmt.Errorf("release %s: %w", lease.ThreadID, pgErr(err))
	}
	return nil
}

// putSQL moves the head and renews the lease only if the lease is current
// and the step is the head's successor, inserts the checkpoint only if that
// update hit, and clears the writes it settles: one statement, one commit.
const putSQL = `WITH t AS (
	UPDATE threads
	SET head = $3::bigint, updated_at = $10::timestamptz, lease_expires = $10::timestamptz + ttl_us * interval '1 microsecond'
	WHERE thread_id = $1 AND lease_token = $2 AND lease_holder IS NOT NULL AND head = $3 - 1
	RETURNING thread_id
), c AS (
	INSERT INTO checkpoints (thread_id, step, source, writers, deltas, snapshot, next, meta, created_at)
	SELECT thread_id, $3, $4, $5, $6, $7, $8, $9, $10 FROM t
	RETURNING step
), w AS (
	DELETE FROM writes USING t WHERE writes.thread_id = t.thread_id AND writes.step <= $3
)
SELECT count(*) FROM c`

// Put implements Saver.
func (p *Postgres) Put(ctx context.Context, lease Lease, cp Checkpoint) error {
	var n int
	err := p.pool.QueryRow(ctx, putSQL, lease.ThreadID, lease.Token, cp.Step, cp.Source, cp.Writers,
		cp.Deltas, cp.Snapshot, cp.Next, cp.Meta, cp.CreatedAt).Scan(&n)
	if err != nil {
		return fmt.Errorf("put %s step %d: %w", lease.ThreadID, cp.Step, pgErr(err))
	}
	if n == 1 {
		return nil
	}
	if err := p.checkLease(ctx, p.pool, lease); err != nil {
		return err
	}
	return ErrConflict
}

type pgQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// checkLease fails with ErrLeaseLost unless lease is the thread's current
// one.
func (p *Postgres) checkLease(ctx context.Context, q pgQuerier, lease Lease) error {
	var held bool
	err := q.QueryRow(ctx, `SELECT lease_holder IS NOT NULL AND lease_token = $2 FROM threads WHERE thread_id = $1`,
		lease.ThreadID, lease.Token).Scan(&held)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !held) {
		return ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("check lease of %s: %w", lease.ThreadID, pgErr(err))
	}
	return nil
}

// PutWrites implements Saver. It is one statement: the lease check locks
// the thread's row (so a takeover waits for it, or it sees the takeover),
// and the writes are upserted in order, each taking a new seq.
func (p *Postgres) PutWrites(ctx context.Context, lease Lease, writes []Write) error {
	writes = dedupWrites(writes)
	steps := make([]int64, len(writes))
	tasks := make([]string, len(writes))
	kinds := make([]string, len(writes))
	payloads := make([][]byte, len(writes))
	for i, w := range writes {
		steps[i], tasks[i], kinds[i], payloads[i] = w.Step, w.TaskID, string(w.Kind), w.Payload
	}
	var ok bool
	err := p.pool.QueryRow(ctx, `WITH t AS (
			SELECT thread_id FROM threads
			WHERE thread_id = $1 AND lease_token = $2 AND lease_holder IS NOT NULL
			FOR SHARE
		), ins AS (
			INSERT INTO writes AS w (thread_id, step, task_id, kind, payload)
			SELECT t.thread_id, u.step, u.task_id, u.kind, u.payload
			FROM t, unnest($3::bigint[], $4::text[], $5::text[], $6::bytea[]) WITH ORDINALITY AS u(step, task_id, kind, payload, ord)
			ORDER BY u.ord
			ON CONFLICT (thread_id, step, task_id, kind)
			DO UPDATE SET payload = excluded.payload, seq = excluded.seq
		)
		SELECT EXISTS (SELECT 1 FROM t)`,
		lease.ThreadID, lease.Token, steps, tasks, kinds, payloads).Scan(&ok)
	if err != nil {
		return fmt.Errorf("put writes %s: %w", lease.ThreadID, pgErr(err))
	}
	if !ok {
		return ErrLeaseLost
	}
	return nil
}

// Load implements Saver.
func (p *Postgres) Load(ctx context.Context, threadID string, step int64) (Loaded, error) {
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var head int64
	err = tx.QueryRow(ctx, `SELECT head FROM threads WHERE thread_id = $1`, threadID).Scan(&head)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && head < 0) {
		return Loaded{}, ErrNotFound
	}
	if err != nil {
		return Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
	}
	if step < 0 {
		step = head
	}
	if step > head {
		return Loaded{}, ErrNotFound
	}
	rows, err := tx.Query(ctx, `SELECT step, source, writers, deltas, snapshot, next, meta, created_at
		FROM checkpoints
		WHERE thread_id = $1 AND step <= $2 AND step >= coalesce(
			(SELECT max(step) FROM checkpoints WHERE thread_id = $1 AND step <= $2 AND snapshot IS NOT NULL),
			(SELECT min(step) FROM checkpoints WHERE thread_id = $1))
		ORDER BY step`, threadID, step)
	if err != nil {
		return Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
	}
	out := Loaded{Head: head}
	for rows.Next() {
		cp := Checkpoint{ThreadID: threadID}
		if err := rows.Scan(&cp.Step, &cp.Source, &cp.Writers, &cp.Deltas, &cp.Snapshot, &cp.Next, &cp.Meta, &cp.CreatedAt); err != nil {
			rows.Close()
			return Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
		}
		out.Chain = append(out.Chain, cp)
	}
	if err := rows.Err(); err != nil {
		return Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
	}
	if len(out.Chain) == 0 || out.Chain[len(out.Chain)-1].Step != step {
		return Loaded{}, ErrNotFound
	}
	if step == head {
		rows, err := tx.Query(ctx, `SELECT step, task_id, kind, payload FROM writes
			WHERE thread_id = $1 AND step = $2 ORDER BY seq`, threadID, head+1)
		if err != nil {
			return Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
		}
		for rows.Next() {
			w := Write{ThreadID: threadID}
			if err := rows.Scan(&w.Step, &w.TaskID, &w.Kind, &w.Payload); err != nil {
				rows.Close()
				return Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
			}
			out.Writes = append(out.Writes, w)
		}
		if err := rows.Err(); err != nil {
			return Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
		}
	}
	return out, tx.Commit(ctx)
}

// List implements Saver.
func (p *Postgres) List(ctx context.Context, threadID string, limit int) ([]Checkpoint, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := p.pool.Query(ctx, `SELECT step, source, writers, meta, created_at FROM checkpoints
		WHERE thread_id = $1 ORDER BY step DESC LIMIT $2`, threadID, lim)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", threadID, pgErr(err))
	}
	var out []Checkpoint
	for rows.Next() {
		cp := Checkpoint{ThreadID: threadID}
		if err := rows.Scan(&cp.Step, &cp.Source, &cp.Writers, &cp.Meta, &cp.CreatedAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list %s: %w", threadID, pgErr(err))
		}
		out = append(out, cp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", threadID, pgErr(err))
	}
	if len(out) == 0 {
		var one int
		if err := p.pool.QueryRow(ctx, `SELECT 1 FROM threads WHERE thread_id = $1`, threadID).Scan(&one); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, ErrNotFound
			}
			return nil, fmt.Errorf("list %s: %w", threadID, pgErr(err))
		}
	}
	return out, nil
}

// Threads implements Saver.
func (p *Postgres) Threads(ctx context.Context) ([]ThreadInfo, error) {
	rows, err := p.pool.Query(ctx, `SELECT thread_id, head, coalesce(lease_holder, ''), created_at, updated_at FROM threads
		ORDER BY updated_at DESC, thread_id`)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", pgErr(err))
	}
	out := []ThreadInfo{}
	for rows.Next() {
		var info ThreadInfo
		if err := rows.Scan(&info.ThreadID, &info.Head, &info.Holder, &info.CreatedAt, &info.UpdatedAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list threads: %w", pgErr(err))
		}
		out = append(out, info)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list threads: %w", pgErr(err))
	}
	return out, nil
}

// Prune implements Saver.
func (p *Postgres) Prune(ctx context.Context, lease Lease, keepFrom int64, snapshot []byte) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		// Lock the thread's row: a takeover waits until the prune is done.
		var held bool
		err := tx.QueryRow(ctx, `SELECT lease_holder IS NOT NULL AND lease_token = $2 FROM threads WHERE thread_id = $1 FOR UPDATE`,
			lease.ThreadID, lease.Token).Scan(&held)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !held) {
			return ErrLeaseLost
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE checkpoints SET snapshot = $3 WHERE thread_id = $1 AND step = $2`,
			lease.ThreadID, keepFrom, snapshot)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		if _, err := tx.Exec(ctx, `DELETE FROM checkpoints WHERE thread_id = $1 AND step < $2`, lease.ThreadID, keepFrom); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM writes WHERE thread_id = $1 AND step < $2`, lease.ThreadID, keepFrom)
		return err
	})
	if err != nil {
		return pgErr(err)
	}
	return nil
}
