package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/store"
)

// ErrElsewhere is what WorkOpts.Pipeline returns for an attempt that this
// worker must leave to others: a run driver's own workers work only that
// run's attempts.
var ErrElsewhere = errors.New("this attempt is for other workers")

// IsWorkerFault reports whether err, an attempt's failure, is the
// worker's own and not the attempt's: its clone cannot serve attempts
// (nodes.ErrWorkerSetup), or its model provider has no key for it
// (llm.ErrMissingKey) or refuses the one it has. A `taskloom worker`
// puts such a job back for another worker without counting a try, and
// leaves that run's attempts alone for a while.
func IsWorkerFault(err error) bool {
	return errors.Is(err, nodes.ErrWorkerSetup) || errors.Is(err, llm.ErrMissingKey) || errors.Is(err, agent.ErrProviderRefused)
}

// WorkOpts configures Start.
type WorkOpts struct {
	// Concurrency is how many attempts run at once; 1 when 0.
	Concurrency int
	// Run runs the attempt of args in this process's repository, with the
	// run's config and model (for `taskloom worker`, Pipeline.Work). An
	// error fails this try of the job, which River then hands out again;
	// ErrElsewhere puts it back for other workers without counting a try.
	Run func(ctx context.Context, args Args) (nodes.AttemptResult, error)
	// Name is this worker as leases and status show it; WorkerName() when
	// empty.
	Name string
	// RunID, for a run driver's own workers, is the one run whose
	// attempts they take (Run returns ErrElsewhere for others).
	RunID string
	// Project names the repository whose attempts these workers take
	// (worktree.Manager.Project): they listen on its queue alone.
	Project string
	// Poll is how often an idle worker looks for jobs besides River's
	// notifications; River's default when 0.
	Poll   time.Duration
	Logger *slog.Logger
}

// Start starts taking attempts from the queue in db and
// returns a function that stops: it cancels the attempts still running
// (their jobs go back to the queue) and waits for them.
func Start(ctx context.Context, db Store, opts *WorkOpts) (stop func(), err error) {
	o := *opts
	if o.Concurrency <= 0 {
		o.Concurrency = 1
	}
	if o.Name == "" {
		o.Name = WorkerName()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	workers := river.NewWorkers()
	w := &attemptWorker{db: db, opts: o, slots: make(chan struct{}, o.Concurrency)}
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	client, err := river.NewClient(db.RiverDriver(), &river.Config{
		ID: o.Name,
		// The unnamed queue too: jobs an older version queued are
		// there; Run turns away those of another repository.
		Queues:  queues(o.Project, o.Concurrency),
		Workers: workers,
		// An attempt is bounded by worker.timeout, not by River.
		JobTimeout: -1,
		// Dead workers are found by their leases within a minute; River's
		// rescuer is the backstop for a run whose driver is gone too.
		RescueStuckJobsAfter: 3 * time.Hour,
		RetryPolicy:          soonRetry{},
		// A run resumed days later must find its finished attempts.
		CompletedJobRetentionPeriod: 30 * 24 * time.Hour,
		FetchPollInterval:           o.Poll,
		Logger:                      quiet(o.Logger),
	})
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	run := o.RunID
	if run == "" && o.Project != "" {
		run = projectKey(o.Project)
	}
	if err := db.RegisterWorker(ctx, store.QueueWorker{Name: o.Name, Run: run, Concurrency: o.Concurrency}); err != nil {
		return nil, fmt.Errorf("queue: register the worker: %w", err)
	}
	if err := client.Start(ctx); err != nil {
		unregister(ctx, db, o.Name)
		return nil, fmt.Errorf("queue: start the worker: %w", err)
	}
	hctx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		heartbeat(hctx, db, o.Name)
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = client.StopAndCancel(sctx)
		stopBeat()
		<-beat
		unregister(sctx, db, o.Name)
	}, nil
}

// heartbeatEvery is how often a worker says it is alive; one silent for
// three beats no longer counts.
const heartbeatEvery = 5 * time.Second

func heartbeat(ctx context.Context, db store.Queue, name string) {
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = db.TouchWorker(ctx, name)
		}
	}
}

func unregister(ctx context.Context, db store.Queue, name string) {
	_ = db.RemoveWorker(context.WithoutCancel(ctx), name)
}

// queues are the River queues a worker of project listens on.
func queues(project string, concurrency int) map[string]river.QueueConfig {
	q := map[string]river.QueueConfig{Name: {MaxWorkers: concurrency}}
	if project != "" {
		q[QueueOf(project)] = river.QueueConfig{MaxWorkers: concurrency}
	}
	return q
}

// Slots returns how many attempts of run, in the repository named by
// project, the live workers take at once: the run's own, and those of the
// `taskloom worker`s that listen on its queue. With a project, those are
// the workers of that repository; workers that name none (an older
// version's) listen only on the unnamed queue, and do not count.
func Slots(ctx context.Context, db store.Queue, runID, project string) (int, error) {
	n, err := db.WorkerSlots(ctx, runID, 3*heartbeatEvery)
	if err != nil || project == "" {
		return n, err
	}
	// WorkerSlots counts the unnamed workers with every key: take them out
	// of both sums.
	mine, err := db.WorkerSlots(ctx, projectKey(project), 3*heartbeatEvery)
	if err != nil {
		return 0, err
	}
	unnamed, err := db.WorkerSlots(ctx, "", 3*heartbeatEvery)
	if err != nil {
		return 0, err
	}
	return n + mine - 2*unnamed, nil
}

// projectKey is what a worker that takes any run of its project registers
// as its run.
func projectKey(project string) string { return "project:" + project }

// soonRetry hands a failed try out again after a few seconds: the usual
// failures (a remote or database out of reach on one machine) are cured by
// another worker, not by waiting.
type soonRetry struct{}

func (soonRetry) NextRetry(job *rivertype.JobRow) time.Time {
	return time.Now().Add(time.Duration(job.Attempt) * 2 * time.Second)
}

type attemptWorker struct {
	river.WorkerDefaults[Args]
	db   Store
	opts WorkOpts
	// slots holds a token per attempt running here. River bounds each
	// queue on its own, and a worker listens on two, so it could run
	// twice its concurrency; a job that finds every slot taken is put
	// back for another worker, which costs it no try.
	slots chan struct{}

	// A worker at fault (IsWorkerFault) takes no job of that run until
	// restUntil, longer after each fault in a row: a key, a model or a
	// config is a run's.
	mu        sync.Mutex
	restUntil map[string]time.Time
	faults    map[string]int
}

// FaultTool is the Tool of the lease a worker at fault leaves on a job it
// put back: its Summary says why the worker cannot run it.
const FaultTool = "fault"

// faultRest is how long a worker rests after its first fault in a row;
// it doubles with each next one, up to 8 times as long.
const faultRest = 30 * time.Second

// rest records a fault of this worker's with run's attempts and returns
// how long it leaves them alone.
func (w *attemptWorker) rest(run string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.faults == nil {
		w.faults, w.restUntil = map[string]int{}, map[string]time.Time{}
	}
	w.faults[run]++
	d := faultRest << min(w.faults[run]-1, 3)
	w.restUntil[run] = time.Now().Add(d)
	return d
}

// resting reports whether the worker leaves run's attempts alone after a
// fault.
func (w *attemptWorker) resting(run string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Now().Before(w.restUntil[run])
}

// healthy clears the faults of run, one of whose attempts ended well here.
func (w *attemptWorker) healthy(run string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.faults, run)
	delete(w.restUntil, run)
}

func (w *attemptWorker) Work(ctx context.Context, job *river.Job[Args]) error {
	select {
	case w.slots <- struct{}{}:
		defer func() { <-w.slots }()
	default:
		return river.JobSnooze(time.Second)
	}
	a := job.Args
	if w.resting(a.RunID) {
		return river.JobSnooze(time.Second)
	}
	lease := a.Lease
	if lease <= 0 {
		lease = 30 * time.Second
	}
	l := &holder{db: w.db, job: job.ID, args: a, worker: w.opts.Name, ttl: lease}
	if err := l.take(ctx); err != nil {
		return fmt.Errorf("worker %s: take the lease of attempt %s/%s/%d: %w", w.opts.Name, a.RunID, a.TaskID, a.Attempt, err)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.renew(wctx, cancel)
	}()
	wctx = nodes.WithActivityFunc(wctx, l.report)
	w.opts.Logger.InfoContext(ctx, "attempt taken", slog.String("run", a.RunID), slog.String("task", a.TaskID), slog.Int("attempt", a.Attempt), slog.Int("try", job.Attempt))
	res, err := w.opts.Run(wctx, a)
	lost := errors.Is(context.Cause(wctx), errLeaseLost)
	cancel(nil)
	<-done
	switch {
	case lost:
		// The lease is another worker's now, and so is the job: River
		// would record this try's end on the other's (it checks the job
		// is running, not whose try runs). Waiting until the other's try
		// has ended makes this one's end change nothing.
		awaitOtherTry(ctx, job)
		return fmt.Errorf("worker %s: %w", w.opts.Name, errLeaseLost)
	case errors.Is(err, ErrElsewhere):
		l.drop(ctx)
		return river.JobSnooze(time.Second)
	case w.opts.RunID == "" && ctx.Err() == nil && IsWorkerFault(err):
		// A run's own workers stop the run instead (the try fails): with
		// no other worker, the run would wait for ever.
		rest := w.rest(a.RunID)
		// The lease says why while this worker rests, for the run to show
		// beside "waiting for a worker"; a worker that takes the job
		// replaces it.
		_, _ = w.db.RenewLease(context.WithoutCancel(ctx), job.ID, w.opts.Name, rest, FaultTool, clip.Line(err.Error(), 300))
		w.opts.Logger.WarnContext(ctx, "this worker cannot run attempts; it leaves them to other workers for a while",
			slog.Duration("rest", rest), slog.String("error", err.Error()))
		return river.JobSnooze(time.Second)
	case err != nil:
		// The lease outlives the try for a moment, until River records
		// the failure, so that the run does not take the attempt for a
		// dead worker's; then it lapses, and status stops naming this
		// worker.
		l.last(ctx, handBackHold, "failed here; back to the queue")
		return fmt.Errorf("worker %s: %w", w.opts.Name, err)
	}
	// The job stays running until River's completer records how it
	// ended, a moment later: the lease is kept over that gap, so that
	// the run does not take the finished attempt for a dead worker's and
	// queue it again. The run drops it once it has the result.
	w.healthy(a.RunID)
	l.last(ctx, l.ttl, "finished; recording the result")
	res.Worker = w.opts.Name
	return river.RecordOutput(ctx, res)
}

// handBackHold is how long a worker's lease outlives a try that failed:
// long enough for River to record the failure.
const handBackHold = 5 * time.Second

// awaitOtherTry returns once job is no longer running another worker's
// try (a later one than job's), or ctx is done.
func awaitOtherTry(ctx context.Context, job *river.Job[Args]) {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		row, err := client.JobGet(ctx, job.ID)
		if err == nil && (row.State != rivertype.JobStateRunning || row.Attempt <= job.Attempt) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// holder is a worker's lease on one attempt, with what it is doing.
type holder struct {
	db     store.Queue
	job    int64
	args   Args
	worker string
	ttl    time.Duration

	mu      sync.Mutex
	act     nodes.Activity
	changed chan struct{}
}

func (h *holder) take(ctx context.Context) error {
	h.changed = make(chan struct{}, 1)
	return h.db.TakeLease(ctx, store.AttemptLease{JobID: h.job, RunID: h.args.RunID, TaskID: h.args.TaskID, Attempt: h.args.Attempt,
		Worker: h.worker, Tool: "worker", Summary: "starting"}, h.ttl)
}

func (h *holder) report(a nodes.Activity) {
	h.mu.Lock()
	h.act = a
	h.mu.Unlock()
	select {
	case h.changed <- struct{}{}:
	default:
	}
}

// errLeaseLost stops an attempt whose lease the run took back: another
// worker has it now.
var errLeaseLost = errors.New("the run took this attempt back after the lease lapsed; another worker has it")

// renew extends the lease a third of its length before it would lapse, and
// writes the latest activity as it changes (at most a few times a second),
// until ctx is done. A lease that is gone (the run took the attempt back)
// stops the attempt through lost.
func (h *holder) renew(ctx context.Context, lost context.CancelCauseFunc) {
	t := time.NewTicker(h.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.changed:
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		h.mu.Lock()
		a := h.act
		h.mu.Unlock()
		tool, summary := a.Tool, a.Summary
		if tool == "" {
			tool, summary = "worker", "starting"
		}
		held, err := h.db.RenewLease(ctx, h.job, h.worker, h.ttl, tool, summary)
		if err != nil {
			// The database is away: the next tick tries again, and the
			// run hands the attempt elsewhere if it stays away.
			continue
		}
		if !held {
			lost(errLeaseLost)
			return
		}
	}
}

// last renews the lease one last time, for ttl, saying how the try
// ended.
func (h *holder) last(ctx context.Context, ttl time.Duration, summary string) {
	_, _ = h.db.RenewLease(context.WithoutCancel(ctx), h.job, h.worker, ttl, "worker", summary)
}

func (h *holder) drop(ctx context.Context) {
	_ = h.db.DropLease(context.WithoutCancel(ctx), h.job, h.worker)
}
