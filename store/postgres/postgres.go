package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/migrations"
	"github.com/taskloom/taskloom/store"
)

var _ store.Driver = (*Driver)(nil)

// Opts configures a PostgreSQL driver. Nil means defaults.
type Opts struct {
	// Logger receives the migrations applied on open. Nil discards them.
	Logger *slog.Logger
	// SkipMigrate leaves the schema as it is.
	SkipMigrate bool
	// Retry says how long operations are retried while the server does not
	// answer (a restart, a network blip). Nil means defaults.
	Retry *checkpoint.RetryOpts
}

// Driver keeps taskloom's records (checkpoints, runs, agent histories) in
// PostgreSQL, in the current schema of its pool's connections (set search_path in the URL to choose
// another). Put is a single statement: one round trip and one commit.
// Times are stored to the microsecond.
//
// Operations that fail because the server or the connection went away are
// retried with backoff (Opts.Retry); each is written so that running
// it again after a failure that may have committed is harmless.
type Driver struct {
	pool    *pgxpool.Pool
	ownPool bool
	mig     *migrations.Migrator
	retry   *checkpoint.Retrier
}

// New returns a driver on pool and applies the migrations. Close does not
// close a pool passed in here.
func New(ctx context.Context, pool *pgxpool.Pool, opts *Opts) (*Driver, error) {
	if opts == nil {
		opts = &Opts{}
	}
	mig, err := NewMigrator(pool, &migrations.Opts{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	p := &Driver{pool: pool, mig: mig, retry: checkpoint.NewRetrier(checkpoint.MaskURL(pool.Config().ConnString()), opts.Retry, Transient)}
	if !opts.SkipMigrate {
		if _, err := p.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("postgres: migrate: %w", err)
		}
	}
	return p, nil
}

// Open connects to the database at url, checks that it answers, applies
// the migrations and returns a driver that owns the connection pool.
// Errors name the URL with its password masked.
func Open(ctx context.Context, url string, opts *Opts) (*Driver, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL %s: %w", checkpoint.MaskURL(url), checkpoint.MaskError(err, url))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", checkpoint.MaskURL(url), checkpoint.MaskError(err, url))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", checkpoint.MaskURL(url), checkpoint.MaskError(err, url))
	}
	p, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	p.ownPool = true
	return p, nil
}

// Pool returns the connection pool, for storing other records in the same
// database.
func (p *Driver) Pool() *pgxpool.Pool { return p.pool }

// Migrator returns the migrator of the database.
func (p *Driver) Migrator() *migrations.Migrator { return p.mig }

// Migrate applies the pending migrations: the store's own, then River's,
// whose job tables hold the attempts that workers on other machines take.
func (p *Driver) Migrate(ctx context.Context) (*migrations.Result, error) {
	res, err := p.mig.Migrate(ctx, migrations.Up, nil)
	if err != nil {
		return nil, err
	}
	rm, err := rivermigrate.New(riverpgxv5.New(p.pool), nil)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	// Processes that start together must not both create River's tables:
	// one holds a lock on the schema while it migrates. (River's steps
	// each need their own transaction, so the lock is a session's.)
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	defer conn.Release()
	var key int64
	if err := conn.QueryRow(ctx, `SELECT hashtextextended('taskloom.river.' || coalesce(current_schema(), ''), 0)`).Scan(&key); err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key) }()
	rres, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("river: %w", err)
	}
	for _, v := range rres.Versions {
		res.Versions = append(res.Versions, migrations.AppliedVersion{Version: v.Version, Name: "river_" + strings.ReplaceAll(v.Name, " ", "_"), Duration: v.Duration})
	}
	return res, nil
}

// Close implements checkpoint.Saver. It closes the pool only when Open made it, not one passed to New.
func (p *Driver) Close() error {
	if p.ownPool {
		p.pool.Close()
	}
	return nil
}

func pgErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return checkpoint.ErrNotFound
	}
	return checkpoint.WrapStoreError("postgres", err)
}

// nullTime binds the zero time as NULL, which the statements replace with
// the server's clock.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Acquire implements checkpoint.Saver. A zero now compares and sets the lease's expiry
// on the server's clock, so that processes whose clocks disagree agree on
// when a lease lapses.
func (p *Driver) Acquire(ctx context.Context, threadID, holder string, now time.Time, ttl time.Duration) (checkpoint.Lease, error) {
	at := nullTime(now)
	var lease checkpoint.Lease
	err := p.retry.Do(ctx, "acquire", func(ctx context.Context) error {
		for range 3 {
			var (
				token   int64
				expires time.Time
			)
			// One statement: create the thread, or take its lease unless
			// another holder's is live. The token grows unless the same
			// holder renews a live lease. Run again after it committed, it
			// finds its own live lease and renews it: same token.
			err := p.pool.QueryRow(ctx, `WITH c AS (SELECT coalesce($4::timestamptz, now()) AS now)
				INSERT INTO threads AS t
					(thread_id, head, lease_holder, lease_token, lease_expires, ttl_us, created_at, updated_at)
				SELECT $1, -1, $2, 1, c.now + $3 * interval '1 microsecond', $3, c.now, c.now FROM c
				ON CONFLICT (thread_id) DO UPDATE SET
					lease_token = CASE
						WHEN t.lease_holder IS NULL OR t.lease_holder <> excluded.lease_holder OR t.lease_expires <= excluded.created_at
						THEN t.lease_token + 1 ELSE t.lease_token END,
					lease_holder = excluded.lease_holder,
					lease_expires = excluded.lease_expires,
					ttl_us = excluded.ttl_us
				WHERE t.lease_holder IS NULL OR t.lease_holder = excluded.lease_holder OR t.lease_expires <= excluded.created_at
				RETURNING lease_token, lease_expires`,
				threadID, holder, ttl.Microseconds(), at).Scan(&token, &expires)
			if err == nil {
				lease = checkpoint.Lease{ThreadID: threadID, Holder: holder, Token: token, Expires: expires, StoreClock: at == nil}
				if at != nil {
					lease.Expires = now.Add(ttl)
				}
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("acquire %s: %w", threadID, pgErr(err))
			}
			// Another holder's lease looked live; report it, unless it was
			// released or expired in the meantime.
			var (
				cur      *string
				exp, cmp time.Time
			)
			err = p.pool.QueryRow(ctx, `SELECT lease_holder, lease_expires, coalesce($2::timestamptz, now()) FROM threads WHERE thread_id = $1`,
				threadID, at).Scan(&cur, &exp, &cmp)
			if err != nil {
				return fmt.Errorf("acquire %s: %w", threadID, pgErr(err))
			}
			if cur != nil && *cur != holder && cmp.Before(exp) {
				return &checkpoint.BusyError{ThreadID: threadID, Holder: *cur, Expires: exp}
			}
		}
		return fmt.Errorf("acquire %s: lease kept changing hands", threadID)
	})
	if err != nil {
		return checkpoint.Lease{}, err
	}
	return lease, nil
}

// Release implements checkpoint.Saver.
func (p *Driver) Release(ctx context.Context, lease checkpoint.Lease) error {
	return p.retry.Do(ctx, "release", func(ctx context.Context) error {
		_, err := p.pool.Exec(ctx, `UPDATE threads SET lease_holder = NULL
			WHERE thread_id = $1 AND lease_token = $2 AND lease_holder IS NOT NULL`, lease.ThreadID, lease.Token)
		if err != nil {
			return fmt.Errorf("release %s: %w", lease.ThreadID, pgErr(err))
		}
		return nil
	})
}

// putSQL moves the head and renews the lease only if the lease is current
// and the step is the head's successor, inserts the checkpoint only if that
// update hit, and clears the writes it settles: one statement, one commit.
// A lease taken on the server's clock ($11) is renewed on it.
const putSQL = `WITH t AS (
	UPDATE threads
	SET head = $3::bigint, updated_at = $10::timestamptz,
		lease_expires = CASE WHEN $11::boolean THEN now() ELSE $10::timestamptz END + ttl_us * interval '1 microsecond'
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

// Put implements checkpoint.Saver. When a try fails after the server may have
// committed it (the connection dropped before the answer), the retry finds
// the head already moved; it then looks for the checkpoint it wrote and
// succeeds if it is there, so that a retried Put neither fails nor writes
// twice.
func (p *Driver) Put(ctx context.Context, lease checkpoint.Lease, cp checkpoint.Checkpoint) error {
	tries := 0
	return p.retry.Do(ctx, "put", func(ctx context.Context) error {
		tries++
		return p.put(ctx, lease, cp, tries > 1)
	})
}

// put tries Put once; retried says that an earlier try may have committed.
func (p *Driver) put(ctx context.Context, lease checkpoint.Lease, cp checkpoint.Checkpoint, retried bool) error {
	var n int
	err := p.pool.QueryRow(ctx, putSQL, lease.ThreadID, lease.Token, cp.Step, cp.Source, cp.Writers,
		cp.Deltas, cp.Snapshot, cp.Next, cp.Meta, cp.CreatedAt, lease.StoreClock).Scan(&n)
	if err != nil {
		return fmt.Errorf("put %s step %d: %w", lease.ThreadID, cp.Step, pgErr(err))
	}
	if n == 1 {
		return nil
	}
	if retried {
		landed, err := p.putLanded(ctx, lease.ThreadID, cp)
		if err != nil {
			return fmt.Errorf("put %s step %d: %w", lease.ThreadID, cp.Step, pgErr(err))
		}
		if landed {
			return nil
		}
	}
	if err := p.checkLease(ctx, p.pool, lease); err != nil {
		return err
	}
	return checkpoint.ErrConflict
}

// putLanded reports whether the thread holds cp as it was written.
func (p *Driver) putLanded(ctx context.Context, threadID string, cp checkpoint.Checkpoint) (bool, error) {
	var ok bool
	err := p.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints
		WHERE thread_id = $1 AND step = $2 AND created_at = $3 AND source = $4
			AND deltas IS NOT DISTINCT FROM $5 AND snapshot IS NOT DISTINCT FROM $6 AND next IS NOT DISTINCT FROM $7)`,
		threadID, cp.Step, cp.CreatedAt, cp.Source, cp.Deltas, cp.Snapshot, cp.Next).Scan(&ok)
	return ok, err
}

type pgQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// checkLease fails with checkpoint.ErrLeaseLost unless lease is the thread's current
// one.
func (p *Driver) checkLease(ctx context.Context, q pgQuerier, lease checkpoint.Lease) error {
	var held bool
	err := q.QueryRow(ctx, `SELECT lease_holder IS NOT NULL AND lease_token = $2 FROM threads WHERE thread_id = $1`,
		lease.ThreadID, lease.Token).Scan(&held)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !held) {
		return checkpoint.ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("check lease of %s: %w", lease.ThreadID, pgErr(err))
	}
	return nil
}

// PutWrites implements checkpoint.Saver. It is one statement: the lease check locks
// the thread's row (so a takeover waits for it, or it sees the takeover),
// and the writes are upserted in order, each taking a new seq. Run again,
// it upserts the same rows.
func (p *Driver) PutWrites(ctx context.Context, lease checkpoint.Lease, writes []checkpoint.Write) error {
	writes = checkpoint.DedupWrites(writes)
	steps := make([]int64, len(writes))
	tasks := make([]string, len(writes))
	kinds := make([]string, len(writes))
	payloads := make([][]byte, len(writes))
	for i, w := range writes {
		steps[i], tasks[i], kinds[i], payloads[i] = w.Step, w.TaskID, string(w.Kind), w.Payload
	}
	return p.retry.Do(ctx, "put writes", func(ctx context.Context) error {
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
			return checkpoint.ErrLeaseLost
		}
		return nil
	})
}

// Load implements checkpoint.Saver.
func (p *Driver) Load(ctx context.Context, threadID string, step int64) (checkpoint.Loaded, error) {
	var out checkpoint.Loaded
	err := p.retry.Do(ctx, "load", func(ctx context.Context) error {
		var err error
		out, err = p.load(ctx, threadID, step)
		return err
	})
	return out, err
}

func (p *Driver) load(ctx context.Context, threadID string, step int64) (checkpoint.Loaded, error) {
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var head int64
	err = tx.QueryRow(ctx, `SELECT head FROM threads WHERE thread_id = $1`, threadID).Scan(&head)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && head < 0) {
		return checkpoint.Loaded{}, checkpoint.ErrNotFound
	}
	if err != nil {
		return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
	}
	if step < 0 {
		step = head
	}
	if step > head {
		return checkpoint.Loaded{}, checkpoint.ErrNotFound
	}
	rows, err := tx.Query(ctx, `SELECT step, source, writers, deltas, snapshot, next, meta, created_at
		FROM checkpoints
		WHERE thread_id = $1 AND step <= $2 AND step >= coalesce(
			(SELECT max(step) FROM checkpoints WHERE thread_id = $1 AND step <= $2 AND snapshot IS NOT NULL),
			(SELECT min(step) FROM checkpoints WHERE thread_id = $1))
		ORDER BY step`, threadID, step)
	if err != nil {
		return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
	}
	out := checkpoint.Loaded{Head: head}
	for rows.Next() {
		cp := checkpoint.Checkpoint{ThreadID: threadID}
		if err := rows.Scan(&cp.Step, &cp.Source, &cp.Writers, &cp.Deltas, &cp.Snapshot, &cp.Next, &cp.Meta, &cp.CreatedAt); err != nil {
			rows.Close()
			return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
		}
		out.Chain = append(out.Chain, cp)
	}
	if err := rows.Err(); err != nil {
		return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
	}
	if len(out.Chain) == 0 || out.Chain[len(out.Chain)-1].Step != step {
		return checkpoint.Loaded{}, checkpoint.ErrNotFound
	}
	if step == head {
		rows, err := tx.Query(ctx, `SELECT step, task_id, kind, payload FROM writes
			WHERE thread_id = $1 AND step = $2 ORDER BY seq`, threadID, head+1)
		if err != nil {
			return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
		}
		for rows.Next() {
			w := checkpoint.Write{ThreadID: threadID}
			if err := rows.Scan(&w.Step, &w.TaskID, &w.Kind, &w.Payload); err != nil {
				rows.Close()
				return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
			}
			out.Writes = append(out.Writes, w)
		}
		if err := rows.Err(); err != nil {
			return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, pgErr(err))
	}
	return out, nil
}

// List implements checkpoint.Saver.
func (p *Driver) List(ctx context.Context, threadID string, limit int) ([]checkpoint.Checkpoint, error) {
	var out []checkpoint.Checkpoint
	err := p.retry.Do(ctx, "list", func(ctx context.Context) error {
		var err error
		out, err = p.list(ctx, threadID, limit)
		return err
	})
	return out, err
}

func (p *Driver) list(ctx context.Context, threadID string, limit int) ([]checkpoint.Checkpoint, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := p.pool.Query(ctx, `SELECT step, source, writers, meta, created_at FROM checkpoints
		WHERE thread_id = $1 ORDER BY step DESC LIMIT $2`, threadID, lim)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", threadID, pgErr(err))
	}
	var out []checkpoint.Checkpoint
	for rows.Next() {
		cp := checkpoint.Checkpoint{ThreadID: threadID}
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
				return nil, checkpoint.ErrNotFound
			}
			return nil, fmt.Errorf("list %s: %w", threadID, pgErr(err))
		}
	}
	return out, nil
}

// Threads implements checkpoint.Saver.
func (p *Driver) Threads(ctx context.Context) ([]checkpoint.ThreadInfo, error) {
	var out []checkpoint.ThreadInfo
	err := p.retry.Do(ctx, "list threads", func(ctx context.Context) error {
		var err error
		out, err = p.threads(ctx)
		return err
	})
	return out, err
}

func (p *Driver) threads(ctx context.Context) ([]checkpoint.ThreadInfo, error) {
	rows, err := p.pool.Query(ctx, `SELECT thread_id, head, coalesce(lease_holder, ''),
		CASE WHEN lease_holder IS NULL THEN NULL ELSE lease_expires END, created_at, updated_at FROM threads
		ORDER BY updated_at DESC, thread_id`)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", pgErr(err))
	}
	out := []checkpoint.ThreadInfo{}
	for rows.Next() {
		var info checkpoint.ThreadInfo
		var expires *time.Time
		if err := rows.Scan(&info.ThreadID, &info.Head, &info.Holder, &expires, &info.CreatedAt, &info.UpdatedAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list threads: %w", pgErr(err))
		}
		if expires != nil {
			info.Expires = *expires
		}
		out = append(out, info)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list threads: %w", pgErr(err))
	}
	return out, nil
}

// Prune implements checkpoint.Saver. It is one transaction, run again whole when it
// fails on a transient error; run again after it committed, it changes
// nothing more.
func (p *Driver) Prune(ctx context.Context, lease checkpoint.Lease, keepFrom int64, snapshot []byte) error {
	return p.retry.Do(ctx, "prune", func(ctx context.Context) error {
		err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			// Lock the thread's row: a takeover waits until the prune is done.
			var held bool
			err := tx.QueryRow(ctx, `SELECT lease_holder IS NOT NULL AND lease_token = $2 FROM threads WHERE thread_id = $1 FOR UPDATE`,
				lease.ThreadID, lease.Token).Scan(&held)
			if errors.Is(err, pgx.ErrNoRows) || (err == nil && !held) {
				return checkpoint.ErrLeaseLost
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
				return checkpoint.ErrNotFound
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
	})
}

// IsURL reports whether dbURL names a PostgreSQL database: it starts with
// postgres:// or postgresql://.
func IsURL(dbURL string) bool {
	l := strings.ToLower(dbURL)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}
