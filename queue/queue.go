// Package queue runs task attempts as River jobs in a run's PostgreSQL
// database, so that `taskloom worker` processes on other machines can take
// them.
//
// A run's driver queues each attempt (Dispatcher) and waits for its result;
// workers (Work) take attempts, run them in their own clone, and record the
// result as the job's output. A worker renews a lease row while it works and
// reports its activity there; a worker whose lease lapses is taken for dead
// and its attempt goes back to the queue at once, with River's own rescuer as
// the backstop. Jobs are unique by run, task and attempt, so a resumed run
// that asks again for an attempt waits on the same job instead of running it
// twice.
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"

	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/store"
)

// Store is a database that can hold the queue: a store driver that keeps
// the app's records of workers and leases (store.Queue) and River's jobs
// beside them. The PostgreSQL driver is one; a program asks its driver for
// it with a type assertion.
type Store interface {
	store.Queue
	// RiverDriver is River's driver on the same database.
	RiverDriver() riverdriver.Driver[pgx.Tx]
	// Requeue makes River's job available again at once when it is still
	// in its try'th try, whose worker is gone, recording reason among its
	// errors, and drops that worker's lease.
	Requeue(ctx context.Context, job int64, try int, reason string) error
}

// Name is the River queue attempts go to, when their run's repository
// could not be named (see QueueOf).
const Name = "taskloom_attempts"

// QueueOf is the River queue of the attempts of a repository, named by
// project (worktree.Manager.Project): the workers of one repository never
// fetch another's jobs, which share the database but not the code.
func QueueOf(project string) string {
	if project == "" {
		return Name
	}
	return Name + "_" + project[:min(len(project), 16)]
}

// Args is one task attempt as a River job: what a worker anywhere needs to
// run it, with no secrets (keys come from the worker's environment).
type Args struct {
	RunID   string `json:"run_id" river:"unique"`
	TaskID  string `json:"task_id" river:"unique"`
	Attempt int    `json:"attempt" river:"unique"`
	// Job is the attempt: the task and the commit it starts from.
	Job nodes.AttemptJob `json:"job"`
	// Model is the run's model spec.
	Model string `json:"model"`
	// Config is the run's effective config, as JSON.
	Config json.RawMessage `json:"config"`
	// Lease is how long a worker's hold lasts without renewal.
	Lease time.Duration `json:"lease"`
	// Project names the run's repository (worktree.Manager.Project): a
	// worker in a clone of another takes none of its attempts.
	Project string `json:"project,omitempty"`
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return "taskloom_attempt" }

// maxTries bounds how often River hands out one attempt whose workers keep
// failing (an unreachable remote, say) before the run counts it as failed.
const maxTries = 5

// InsertOpts implements river.JobArgsWithInsertOpts.
func (a Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueOf(a.Project), MaxAttempts: maxTries, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// WorkerName is this process as leases and status name it: host:pid.
func WorkerName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}
