package store

import (
	"context"
	"time"
)

// ForgetWorkersAfter is how long a worker's record outlives the last time
// it was seen. It is far longer than any heartbeat gap, so that a live
// worker on a slow link is never forgotten.
const ForgetWorkersAfter = 24 * time.Hour

// Queue keeps the app's records of a queue of attempts that worker
// processes, on this machine or others, take: the live workers, and each
// worker's lease on the attempt it works. A driver whose database can hold
// such a queue implements Queue beside Driver, as PostgreSQL does; a
// program asks a Driver for it with a type assertion. SQLite does not: a
// run on SQLite works every attempt in its own process.
//
// Times are the database's, so that workers whose clocks disagree still
// agree on which lease has lapsed. Unlike Records, Queue does not retry an
// operation that fails because the database went away: its callers work in
// loops that try again at their next tick.
type Queue interface {
	// RegisterWorker records a live worker, or replaces the record of one
	// by the same name, as seen now. It also forgets the workers not seen
	// for ForgetWorkersAfter: a worker killed outright never removes
	// itself, and its record would otherwise stay for good.
	RegisterWorker(ctx context.Context, w QueueWorker) error
	// TouchWorker records that the named worker is still alive.
	TouchWorker(ctx context.Context, name string) error
	// RemoveWorker deletes the named worker's record.
	RemoveWorker(ctx context.Context, name string) error
	// WorkerSlots returns how many attempts of run the workers seen within
	// the last d take at once: those that take any run's attempts, and
	// those that take only run's.
	WorkerSlots(ctx context.Context, run string, d time.Duration) (int, error)

	// TakeLease records l.Worker's lease on the attempt of job l.JobID,
	// lapsing after ttl, replacing any lease on that job.
	TakeLease(ctx context.Context, l AttemptLease, ttl time.Duration) error
	// RenewLease extends worker's lease on job by ttl from now and records
	// what the worker is doing. It reports false, and changes nothing, when
	// worker holds no lease on job: it was taken back.
	RenewLease(ctx context.Context, job int64, worker string, ttl time.Duration, tool, summary string) (bool, error)
	// DropLease deletes the lease on job held by worker, or whoever holds
	// it when worker is "".
	DropLease(ctx context.Context, job int64, worker string) error
	// GetLease returns the lease on job, with Lapsed set when it has;
	// ErrNotFound when there is none.
	GetLease(ctx context.Context, job int64) (AttemptLease, error)
	// Leases returns the leases on run's attempts that have not lapsed, by
	// task and attempt.
	Leases(ctx context.Context, run string) ([]AttemptLease, error)
	// AttemptJobs returns the queue's jobs of run's attempts, newest try
	// state first by task and attempt; none when the run queued nothing
	// (it ran its attempts itself).
	AttemptJobs(ctx context.Context, run string) ([]AttemptJob, error)
}

// QueueWorker is a worker process as the queue knows it.
type QueueWorker struct {
	// Name is host:pid, or host:pid/run for a run's own workers.
	Name string
	// Run is the one run whose attempts the worker takes; "" for any. (A
	// queue may key it otherwise: by the repository whose runs it takes.)
	Run string
	// Concurrency is how many attempts it runs at once.
	Concurrency int
}

// AttemptLease is a worker's hold on a queued attempt, and what the worker
// says it is doing.
// AttemptJob is the queue's job of one attempt, as status reads it.
type AttemptJob struct {
	TaskID  string
	Attempt int
	// State is River's: available, running, retryable, completed…
	State string
	// Worker is the worker that took its last try, "" when none has.
	Worker string
	// LastError is what its last failed try said, "" when none failed.
	LastError string
}

type AttemptLease struct {
	JobID   int64
	RunID   string
	TaskID  string
	Attempt int
	// Worker names the worker that holds it.
	Worker        string
	Tool, Summary string
	// Lapsed, from GetLease, says that the worker stopped renewing it.
	Lapsed bool
}
