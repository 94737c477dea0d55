package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/taskloom/taskloom/store"
)

var _ store.Queue = (*Driver)(nil)

// The queue's attempts are River jobs in the same database, created by the
// driver's migrations; the app's records of workers and leases sit beside
// them in attempt_workers and attempt_leases.

// RiverDriver returns River's driver on the store's pool, for a River
// client whose jobs live in this database.
func (p *Driver) RiverDriver() riverdriver.Driver[pgx.Tx] { return riverpgxv5.New(p.pool) }

// RegisterWorker implements store.Queue.
func (p *Driver) RegisterWorker(ctx context.Context, w store.QueueWorker) error {
	_, err := p.pool.Exec(ctx, `WITH gone AS (DELETE FROM attempt_workers WHERE name <> $1 AND seen_at < now() - $4 * interval '1 second')
		INSERT INTO attempt_workers (name, run_id, concurrency, seen_at) VALUES ($1, $2, $3, now())
		ON CONFLICT (name) DO UPDATE SET run_id = excluded.run_id, concurrency = excluded.concurrency, seen_at = now()`,
		w.Name, w.Run, w.Concurrency, int64(store.ForgetWorkersAfter/time.Second))
	return err
}

// TouchWorker implements store.Queue.
func (p *Driver) TouchWorker(ctx context.Context, name string) error {
	_, err := p.pool.Exec(ctx, `UPDATE attempt_workers SET seen_at = now() WHERE name = $1`, name)
	return err
}

// RemoveWorker implements store.Queue.
func (p *Driver) RemoveWorker(ctx context.Context, name string) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM attempt_workers WHERE name = $1`, name)
	return err
}

// WorkerSlots implements store.Queue.
func (p *Driver) WorkerSlots(ctx context.Context, run string, d time.Duration) (int, error) {
	var n int
	err := p.pool.QueryRow(ctx, `SELECT coalesce(sum(concurrency), 0) FROM attempt_workers
		WHERE run_id IN ('', $1) AND seen_at > now() - $2 * interval '1 millisecond'`, run, d.Milliseconds()).Scan(&n)
	return n, err
}

// TakeLease implements store.Queue.
func (p *Driver) TakeLease(ctx context.Context, l store.AttemptLease, ttl time.Duration) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO attempt_leases (job_id, run_id, task_id, attempt, worker, expires_at, tool, summary, updated_at)
		VALUES ($1, $2, $3, $4, $5, now() + $6 * interval '1 millisecond', $7, $8, now())
		ON CONFLICT (job_id) DO UPDATE SET run_id = excluded.run_id, task_id = excluded.task_id, attempt = excluded.attempt,
			worker = excluded.worker, expires_at = excluded.expires_at,
			tool = excluded.tool, summary = excluded.summary, updated_at = excluded.updated_at`,
		l.JobID, l.RunID, l.TaskID, l.Attempt, l.Worker, ttl.Milliseconds(), l.Tool, l.Summary)
	return err
}

// RenewLease implements store.Queue.
func (p *Driver) RenewLease(ctx context.Context, job int64, worker string, ttl time.Duration, tool, summary string) (bool, error) {
	tag, err := p.pool.Exec(ctx, `UPDATE attempt_leases SET expires_at = now() + $3 * interval '1 millisecond', tool = $4, summary = $5, updated_at = now()
		WHERE job_id = $1 AND worker = $2`, job, worker, ttl.Milliseconds(), tool, summary)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// DropLease implements store.Queue.
func (p *Driver) DropLease(ctx context.Context, job int64, worker string) error {
	_, err := p.pool.Exec(ctx, `DELETE FROM attempt_leases WHERE job_id = $1 AND $2 IN ('', worker)`, job, worker)
	return err
}

const leaseColumns = `job_id, run_id, task_id, attempt, worker, tool, summary, expires_at < now()`

func scanLease(r pgx.Row) (store.AttemptLease, error) {
	var l store.AttemptLease
	err := r.Scan(&l.JobID, &l.RunID, &l.TaskID, &l.Attempt, &l.Worker, &l.Tool, &l.Summary, &l.Lapsed)
	return l, err
}

// GetLease implements store.Queue.
func (p *Driver) GetLease(ctx context.Context, job int64) (store.AttemptLease, error) {
	l, err := scanLease(p.pool.QueryRow(ctx, `SELECT `+leaseColumns+` FROM attempt_leases WHERE job_id = $1`, job))
	return l, recordsErr(err, store.ErrNotFound)
}

// Leases implements store.Queue. A database migrated before the queue
// existed holds no leases.
func (p *Driver) Leases(ctx context.Context, run string) ([]store.AttemptLease, error) {
	rows, err := p.pool.Query(ctx, `SELECT `+leaseColumns+` FROM attempt_leases
		WHERE run_id = $1 AND expires_at >= now() ORDER BY task_id, attempt`, run)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.AttemptLease, error) { return scanLease(r) })
}

// AttemptJobs implements store.Queue.
func (p *Driver) AttemptJobs(ctx context.Context, run string) ([]store.AttemptJob, error) {
	rows, err := p.pool.Query(ctx, `SELECT args->>'task_id', (args->>'attempt')::int, state::text,
			coalesce(attempted_by[array_length(attempted_by, 1)], ''),
			coalesce(errors[array_length(errors, 1)]->>'error', '')
		FROM river_job WHERE kind = 'taskloom_attempt' AND args->>'run_id' = $1
		ORDER BY args->>'task_id', (args->>'attempt')::int`, run)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.AttemptJob, error) {
		var j store.AttemptJob
		err := r.Scan(&j.TaskID, &j.Attempt, &j.State, &j.Worker, &j.LastError)
		return j, err
	})
}

// Requeue makes River's job available again at once when it is still
// running its try'th try, whose worker is gone: it records reason among
// the job's errors, as River's rescuer does, and drops the dead worker's
// lease. A job that moved on in the meantime (another try started, or it
// ended) is left as it is.
func (p *Driver) Requeue(ctx context.Context, job int64, try int, reason string) error {
	_, err := p.pool.Exec(ctx, `WITH j AS (
		UPDATE river_job SET state = 'available', scheduled_at = now(),
			errors = array_append(coalesce(errors, '{}'), jsonb_build_object('at', now(), 'attempt', attempt, 'error', $3::text, 'trace', ''))
		WHERE id = $1 AND state = 'running' AND attempt = $2
		RETURNING id)
	DELETE FROM attempt_leases WHERE job_id IN (SELECT id FROM j)`, job, try, reason)
	return err
}
