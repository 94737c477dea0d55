package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/store"
)

// DispatcherOpts configures a Dispatcher.
type DispatcherOpts struct {
	// Model and Config are the run's, as jobs carry them.
	Model  string
	Config json.RawMessage
	// Lease is how long a worker's hold lasts without renewal; 30s when 0.
	Lease time.Duration
	// Project names the run's repository, as jobs carry it.
	Project string
	// Poll is how often the job is looked at while it runs; 250ms when 0.
	Poll time.Duration
	// NoWorkerAfter is how long a queued attempt waits before the
	// dispatcher looks whether any worker is there to take it, and then
	// how often; 10s when 0.
	NoWorkerAfter time.Duration
	Logger        *slog.Logger
}

// Dispatcher queues a run's attempts as River jobs and waits for their
// results. It implements nodes.Dispatcher.
type Dispatcher struct {
	db     Store
	client *river.Client[pgx.Tx]
	opts   DispatcherOpts
}

// NewDispatcher returns a Dispatcher on the queue in db, whose tables the
// store's migrations created.
func NewDispatcher(db Store, opts *DispatcherOpts) (*Dispatcher, error) {
	d := &Dispatcher{db: db}
	if opts != nil {
		d.opts = *opts
	}
	if d.opts.Lease <= 0 {
		d.opts.Lease = 30 * time.Second
	}
	if d.opts.Poll <= 0 {
		d.opts.Poll = 250 * time.Millisecond
	}
	if d.opts.NoWorkerAfter <= 0 {
		d.opts.NoWorkerAfter = 10 * time.Second
	}
	if d.opts.Logger == nil {
		d.opts.Logger = slog.New(slog.DiscardHandler)
	}
	client, err := river.NewClient(db.RiverDriver(), &river.Config{Logger: quiet(d.opts.Logger)})
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	d.client = client
	return d, nil
}

// Dispatch implements nodes.Dispatcher.
func (d *Dispatcher) Dispatch(ctx context.Context, job nodes.AttemptJob, progress func(nodes.Activity)) (nodes.AttemptResult, error) {
	args := Args{RunID: job.RunID, TaskID: job.Task.ID, Attempt: job.Attempt, Job: job,
		Model: d.opts.Model, Config: d.opts.Config, Lease: d.opts.Lease, Project: d.opts.Project}
	ins, err := d.client.Insert(ctx, args, nil)
	if err != nil {
		return nodes.AttemptResult{}, fmt.Errorf("queue attempt %s/%s/%d: %w", job.RunID, job.Task.ID, job.Attempt, err)
	}
	id := ins.Job.ID
	if ins.UniqueSkippedAsDuplicate {
		d.opts.Logger.InfoContext(ctx, "attempt already queued; waiting for it", slog.Int64("job", id), slog.String("state", string(ins.Job.State)))
	}
	var seen string
	say := func(a nodes.Activity) {
		if key := a.Worker + "\x00" + a.Tool + "\x00" + a.Summary; key != seen {
			seen = key
			progress(a)
		}
	}
	t := time.NewTicker(d.opts.Poll)
	defer t.Stop()
	queued := time.Now()
	var lookedForWorkers, lookedForFault time.Time
	fault := "" // what waiting.Summary ends with from a worker's fault
	waiting := nodes.Activity{Tool: "queue", Summary: "waiting for a worker"}
	for {
		row, err := d.client.JobGet(ctx, id)
		switch {
		case err != nil && ctx.Err() != nil:
			return nodes.AttemptResult{}, ctx.Err()
		case errors.Is(err, river.ErrNotFound):
			return nodes.AttemptResult{}, fmt.Errorf("attempt job %d is gone from the queue", id)
		case err != nil:
			// The database is away for a moment: the job is safe there.
			d.opts.Logger.WarnContext(ctx, "cannot read the attempt's job; retrying", slog.Int64("job", id), slog.Any("error", err))
		default:
			switch row.State {
			case rivertype.JobStateCompleted:
				d.dropLease(ctx, id)
				var res nodes.AttemptResult
				if err := json.Unmarshal(row.Output(), &res); err != nil {
					return nodes.AttemptResult{}, fmt.Errorf("attempt job %d: its result is unreadable: %w", id, err)
				}
				return res, nil
			case rivertype.JobStateDiscarded, rivertype.JobStateCancelled:
				d.dropLease(ctx, id)
				return nodes.AttemptResult{}, fmt.Errorf("its job was %s after %d tries: %s", row.State, row.Attempt, lastError(row))
			case rivertype.JobStateRunning:
				if a, ok := d.checkLease(ctx, row); ok {
					say(a)
				}
			default:
				if time.Since(lookedForFault) >= faultLook {
					// A worker that could not run it says why on its lease.
					lookedForFault = time.Now()
					waiting.Summary = strings.TrimSuffix(waiting.Summary, fault)
					fault = ""
					if l, err := d.db.GetLease(ctx, id); err == nil && !l.Lapsed && l.Tool == FaultTool {
						fault = fmt.Sprintf("; %s cannot run it: %s", l.Worker, l.Summary)
						waiting.Summary += fault
					}
				}
				if after := d.opts.NoWorkerAfter; time.Since(queued) >= after && time.Since(lookedForWorkers) >= after {
					// A queue nobody takes from waits forever: say so, once
					// it has waited a while, and how to start a worker.
					lookedForWorkers = time.Now()
					if n, err := Slots(ctx, d.db, job.RunID, d.opts.Project); err == nil {
						waiting.Summary = "waiting for a worker"
						if n <= 0 {
							waiting.Summary = "waiting for a worker: none is taking this repository's attempts; start `taskloom worker --db …` in a clone of it"
						}
						waiting.Summary += fault
					}
				}
				say(waiting)
			}
		}
		select {
		case <-ctx.Done():
			return nodes.AttemptResult{}, ctx.Err()
		case <-t.C:
		}
	}
}

// faultLook is how often a waiting attempt's lease is read for a worker's
// fault.
const faultLook = 2 * time.Second

// dropLease deletes the lease a worker kept on a job that has ended.
func (d *Dispatcher) dropLease(ctx context.Context, jobID int64) {
	_ = d.db.DropLease(ctx, jobID, "")
}

func lastError(row *rivertype.JobRow) string {
	if len(row.Errors) == 0 {
		return "no error recorded"
	}
	return row.Errors[len(row.Errors)-1].Error
}

// checkLease looks at the lease of a running job: its worker's activity,
// or, when the worker stopped renewing it, the job handed back to the
// queue so that another worker takes it now.
func (d *Dispatcher) checkLease(ctx context.Context, row *rivertype.JobRow) (nodes.Activity, bool) {
	l, err := d.db.GetLease(ctx, row.ID)
	reason := ""
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Taken, but no worker holds it: it died before it could say so.
		if row.AttemptedAt != nil && time.Since(*row.AttemptedAt) > d.opts.Lease {
			reason = fmt.Sprintf("no worker held it for %s after it was taken", d.opts.Lease)
		}
	case err != nil:
		return nodes.Activity{}, false
	case l.Lapsed:
		reason = fmt.Sprintf("worker %s stopped renewing its lease (worker.lease %s)", l.Worker, d.opts.Lease)
	default:
		return nodes.Activity{Worker: l.Worker, Tool: l.Tool, Summary: l.Summary}, true
	}
	if reason == "" {
		return nodes.Activity{}, false
	}
	if err := d.db.Requeue(ctx, row.ID, row.Attempt, reason); err != nil {
		d.opts.Logger.WarnContext(ctx, "cannot hand a dead worker's attempt back to the queue", slog.Int64("job", row.ID), slog.Any("error", err))
		return nodes.Activity{}, false
	}
	d.opts.Logger.WarnContext(ctx, "attempt handed back to the queue", slog.Int64("job", row.ID), slog.String("reason", reason))
	return nodes.Activity{Worker: l.Worker, Tool: "queue", Summary: "requeued: " + reason}, true
}

// quiet passes on River's warnings and errors only: its routine messages
// would drown a run's own.
func quiet(l *slog.Logger) *slog.Logger {
	return slog.New(levelFilter{l.Handler(), slog.LevelWarn})
}

type levelFilter struct {
	slog.Handler
	min slog.Level
}

func (f levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.Handler.Enabled(ctx, l)
}

func (f levelFilter) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFilter{f.Handler.WithAttrs(a), f.min}
}

func (f levelFilter) WithGroup(n string) slog.Handler {
	return levelFilter{f.Handler.WithGroup(n), f.min}
}
