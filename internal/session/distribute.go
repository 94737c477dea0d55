package session

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/queue"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/worktree"
)

// ErrNoWorkers says that a run was asked to run no attempts itself where
// no `taskloom worker` can take them.
var ErrNoWorkers = errors.New("--workers 0 leaves every attempt to `taskloom worker` processes")

// distribute queues the run's attempts as River jobs when its store is
// PostgreSQL and its repo has the remote that workers on other machines
// share (worker.remote): `taskloom worker` processes anywhere take them,
// and so do meta.Workers workers in this process. Otherwise the attempts
// run here, as they always did. The returned function stops this process's
// workers.
func (s *Session) distribute(ctx context.Context, p *nodes.Pipeline, meta Meta) (stop func(), err error) {
	db := s.queue()
	if db == nil || !p.Repo.HasRemote(ctx, s.Cfg.Worker.Remote) {
		if meta.Workers == 0 {
			return nil, fmt.Errorf("%w, which need a PostgreSQL store (--db postgres://…) and the git remote %q (worker.remote) in this repo", ErrNoWorkers, s.Cfg.Worker.Remote)
		}
		return func() {}, nil
	}
	project := p.Repo.Project(ctx)
	if project == "" {
		// A shallow clone cannot name its repository, so its jobs would
		// go where the workers of every repository sharing the database
		// look, and another's would take them and fail them try after
		// try. Its attempts run here.
		if meta.Workers == 0 {
			return nil, fmt.Errorf("%w, which cannot tell this shallow clone's attempts from another repository's: clone in full (or git fetch --unshallow), or run with --workers 1 or more", ErrNoWorkers)
		}
		s.Logger.InfoContext(ctx, "a shallow clone: attempts run in this process, not on taskloom workers")
		return func() {}, nil
	}
	cfg, err := json.Marshal(jobConfig(s.Cfg))
	if err != nil {
		return nil, err
	}
	d, err := queue.NewDispatcher(db, &queue.DispatcherOpts{Model: meta.Model, Config: cfg, Lease: s.Cfg.Worker.Lease.Duration,
		Project: project, Logger: s.Logger})
	if err != nil {
		return nil, err
	}
	run := p.RunID
	p.Dispatcher, p.Remote = d, s.Cfg.Worker.Remote
	p.SlotsFunc = func(ctx context.Context) int {
		n, err := queue.Slots(ctx, db, run, project)
		if err != nil {
			return 0
		}
		return n
	}
	if meta.Workers == 0 {
		return func() {}, nil
	}
	// This process's workers share the run's repository: the attempt's
	// worktree is already where verify_task looks for it.
	return queue.Start(ctx, db, &queue.WorkOpts{Concurrency: meta.Workers, RunID: run, Project: project, Name: queue.WorkerName() + "/" + run, Logger: s.Logger,
		Run: func(ctx context.Context, a queue.Args) (nodes.AttemptResult, error) {
			if a.RunID != run {
				return nodes.AttemptResult{}, queue.ErrElsewhere
			}
			return p.RunAttempt(ctx, a.Job)
		}})
}

// MarkWorkers names, on each of a run's in-flight attempts, the worker
// process that holds it (host:pid) and what that worker says it is doing,
// from the leases in the database; for one no worker holds, what its job
// in the queue says: waiting (with why its last try failed), or finished.
// A SQLite store has no queue, and a run that queued nothing runs its
// attempts itself: ws is left as it is.
func (s *Session) MarkWorkers(ctx context.Context, runID string, ws []nodes.WorkerStatus) error {
	db := s.queue()
	if db == nil {
		return nil
	}
	jobs, err := db.AttemptJobs(ctx, runID)
	if err != nil || len(jobs) == 0 {
		return err
	}
	leases, err := db.Leases(ctx, runID)
	if err != nil {
		return err
	}
	for i, w := range ws {
		held := false
		for _, l := range leases {
			if l.TaskID == w.TaskID && l.Attempt == w.Attempt && l.Tool == queue.FaultTool {
				// Not held: put back by a worker that cannot run it.
				ws[i].Activity = fmt.Sprintf("queued; %s cannot run it: %s", l.Worker, l.Summary)
				held = true
				continue
			}
			if l.TaskID == w.TaskID && l.Attempt == w.Attempt {
				ws[i].Host = l.Worker
				ws[i].Activity = strings.TrimSpace(l.Tool + " " + l.Summary)
				if l.Summary == agent.WaitingForModel {
					ws[i].Activity = l.Summary // not "model waiting for the model"
				}
				held = true
			}
		}
		if held || w.Activity != nodes.ActivityImplementing {
			continue
		}
		ws[i].Activity = "queued; no taskloom worker has taken it yet"
		for _, j := range jobs {
			if j.TaskID != w.TaskID || j.Attempt != w.Attempt {
				continue
			}
			switch j.State {
			case "completed":
				ws[i].Host, ws[i].Activity = j.Worker, "finished; the run takes its result next"
			case "running":
				ws[i].Host, ws[i].Activity = j.Worker, "taken by a worker"
			default:
				if j.LastError != "" {
					ws[i].Activity = fmt.Sprintf("queued again; its last try failed on %s: %s", j.Worker, clip.Line(j.LastError, 160))
				}
			}
		}
	}
	return nil
}

// queue is the session's store as the queue of attempts, or nil for a
// store that cannot hold one (SQLite).
func (s *Session) queue() queue.Store {
	if q, ok := s.Saver.(queue.Store); ok {
		return q
	}
	return nil
}

// jobConfig is the config a job carries to workers elsewhere: the run's,
// without the database URL, whose password must not be stored, and with
// the MCP servers' env values and URL credentials masked, as `taskloom
// config` prints them: River keeps its jobs after they end, in a database
// other projects may share. A worker puts back its own (workerSecrets).
func jobConfig(c config.Config) config.Config {
	c.Database.URL = ""
	c.MCP = c.Redacted().MCP
	return c
}

// workerSecrets puts back, in the MCP servers of a job's config, what
// jobConfig masked: the env values and URL of the server of the same name
// in this worker's own config, or else, for an env value, this process's
// variable of that name, as for the provider's key. A value found in
// neither is left out.
func workerSecrets(job, own []config.MCPServer) []config.MCPServer {
	out := slices.Clone(job)
	for i := range out {
		s := &out[i]
		var mine config.MCPServer
		for _, o := range own {
			if o.Name == s.Name {
				mine = o
			}
		}
		if mine.URL != "" && config.RedactURL(mine.URL) == s.URL {
			s.URL = mine.URL
		}
		if len(s.Env) == 0 {
			continue
		}
		env := make(map[string]string, len(s.Env))
		for k := range s.Env {
			if v, ok := mine.Env[k]; ok {
				env[k] = v
			} else if v, ok := os.LookupEnv(k); ok {
				env[k] = v
			}
		}
		s.Env = env
	}
	return out
}

// ErrWorkerNeedsPostgres says that `taskloom worker` was not given the
// runs' database.
var ErrWorkerNeedsPostgres = errors.New("taskloom worker needs the runs' PostgreSQL database: pass --db postgres://… (or set TASKLOOM_DB)")

// IsPostgresURL reports whether a store URL names PostgreSQL.
func IsPostgresURL(u string) bool { return postgres.IsURL(u) }

// WorkerName is this process as `taskloom worker` shows it, host:pid.
func WorkerName() string { return queue.WorkerName() }

// WorkOpts configures Work.
type WorkOpts struct {
	// Concurrency is how many attempts run at once.
	Concurrency int
	// Out, when set, hears a line as each attempt starts and ends.
	Out io.Writer
}

// CheckWorkerClone refuses, before a worker waits on anything, a folder
// that cannot serve as its clone: one outside a git repository, one
// without the remote runs share attempts through, or one whose remote
// does not answer, which would fail every attempt the worker took, at its
// end, each costing the run a try that a worker with a good remote could
// have used.
func CheckWorkerClone(ctx context.Context, dir, remote string) error {
	root, err := worktree.FindRoot(ctx, dir)
	if err != nil {
		return fmt.Errorf("%w: start taskloom worker in a clone of the runs' repo", err)
	}
	if !worktree.HasRemoteIn(ctx, root, remote) {
		return fmt.Errorf("%s has no git remote %q, which runs share attempts through: start taskloom worker in a clone of the runs' repo, or set worker.remote", root, remote)
	}
	res, err := proc.Run(ctx, proc.Cmd{Args: []string{"git", "ls-remote", "--refs", remote, "HEAD"}, Dir: root, Env: worktree.GitEnvAt(root), Timeout: time.Minute})
	if err == nil && res.ExitCode != 0 {
		err = errors.New(clip.Line(strings.TrimSpace(res.Stderr), 300))
	}
	if err != nil || res.TimedOut {
		return fmt.Errorf("cannot reach the git remote %q of %s, which attempts are fetched from and pushed to: %v", remote, root, cmp.Or(err, errors.New("no answer within a minute")))
	}
	return nil
}

// Work takes attempts from the queue of the session's PostgreSQL store and
// runs them in the session's repo, a clone of the runs' repo, until ctx is
// done: the base of each is fetched from the job's worker.remote, and the
// attempt's commit pushed back there. Keys come from this process's
// environment.
func (s *Session) Work(ctx context.Context, o WorkOpts) error {
	db := s.queue()
	if db == nil {
		return ErrWorkerNeedsPostgres
	}
	// Without the shared remote every attempt would fail at its first
	// fetch, each failure costing the run a try: refuse to start instead.
	// (Asked first: a fresh clone of nothing has no commit either, and the
	// remote is what it lacks.)
	repo, err := worktree.Open(ctx, s.Repo, nil)
	if err != nil {
		return err
	}
	project := repo.Project(ctx)
	if err := ctx.Err(); err != nil {
		return err // stopped while it looked: git's failure says nothing of the clone
	}
	if project == "" {
		// Its runs' attempts go to their repository's queue, which a
		// clone that cannot name it does not know.
		return fmt.Errorf("%s is a shallow clone, which cannot tell which repository's attempts are its own: clone in full (or git fetch --unshallow), then start taskloom worker again", s.Repo)
	}
	var mu, outMu sync.Mutex
	runs := map[string]*jobRun{}
	get := func(ctx context.Context, a queue.Args) (*nodes.Pipeline, error) {
		mu.Lock()
		defer mu.Unlock()
		if r, ok := runs[a.RunID]; ok {
			return r.p, nil
		}
		r, err := s.jobRun(ctx, a)
		if err != nil {
			return nil, err
		}
		runs[a.RunID] = r
		return r.p, nil
	}
	stop, err := queue.Start(ctx, db, &queue.WorkOpts{Concurrency: max(o.Concurrency, 1), Project: project, Logger: s.Logger,
		Run: func(ctx context.Context, a queue.Args) (res nodes.AttemptResult, err error) {
			if !repo.SameProject(ctx, a.Project) {
				// A run of another repository that shares the
				// database: its own workers take it.
				return nodes.AttemptResult{}, queue.ErrElsewhere
			}
			p, err := get(ctx, a)
			if err != nil && ctx.Err() == nil && !queue.IsWorkerFault(err) {
				// The run's config or model cannot be used in this clone
				// (another version, a missing tool): another worker may.
				err = fmt.Errorf("%w: %w", nodes.ErrWorkerSetup, err)
			}
			if err == nil && !baseHere(ctx, repo, p.Remote, a) {
				return nodes.AttemptResult{}, queue.ErrElsewhere
			}
			say := func(format string, args ...any) {
				if o.Out != nil {
					outMu.Lock()
					defer outMu.Unlock()
					fmt.Fprintf(o.Out, "%s run %s: %s attempt %d: %s\n", time.Now().Format("15:04:05"), a.RunID, a.TaskID, a.Attempt, fmt.Sprintf(format, args...))
				}
			}
			say("started")
			defer func() {
				switch {
				case errors.Is(err, queue.ErrElsewhere):
				case queue.IsWorkerFault(err):
					say("cannot run it here, left to other workers while this one rests: %s", clip.Line(err.Error(), 200))
				case err != nil:
					say("failed here, back to the queue: %s", clip.Line(err.Error(), 200))
				default:
					say("finished: %s", clip.Line(res.Note, 200))
				}
			}()
			if err != nil {
				return nodes.AttemptResult{}, err
			}
			return p.Work(ctx, a.Job)
		}})
	if err != nil {
		return err
	}
	if o.Out != nil {
		outMu.Lock()
		fmt.Fprintf(o.Out, "taskloom worker %s: taking attempts (%d at a time) until stopped\n", WorkerName(), max(o.Concurrency, 1))
		outMu.Unlock()
	}
	<-ctx.Done()
	stop()
	for _, r := range runs {
		_ = r.s.mcp.Close()
		// The worktrees parked for the next attempts go with the worker.
		r.p.Repo.ReleaseIdle(context.WithoutCancel(ctx))
	}
	return ctx.Err()
}

// jobRun is what runs a run's attempts in a worker: the run's config in
// its own session, and the pipeline built from it.
type jobRun struct {
	s *Session
	p *nodes.Pipeline
}

// jobRun builds what runs the attempts of a job's run here: the run's
// config and model, in this repo.
func (s *Session) jobRun(ctx context.Context, a queue.Args) (*jobRun, error) {
	var cfg config.Config
	if err := json.Unmarshal(a.Config, &cfg); err != nil {
		return nil, fmt.Errorf("the job of %s/%s/%d carries an unreadable config: %w", a.RunID, a.TaskID, a.Attempt, err)
	}
	cfg.MCP.Servers = workerSecrets(cfg.MCP.Servers, s.Cfg.MCP.Servers)
	js := &Session{Cfg: cfg, Repo: s.Repo, DBURL: s.DBURL, Saver: s.Saver, Store: s.Store, Logger: s.Logger, flags: s.flags, stderr: s.stderr}
	p, err := js.Pipeline(ctx, a.RunID, "", Meta{Model: a.Model, Workers: 1})
	if err != nil {
		return nil, err
	}
	p.Remote = cfg.Worker.Remote
	return &jobRun{s: js, p: p}, nil
}

// baseHere reports whether the attempt of a, a job that names no
// repository (an older version queued it), can start here: its base is in
// repo or on its remote. Another repository's job is turned away before it
// costs a try; a remote that does not answer leaves that to the fetch.
func baseHere(ctx context.Context, repo *worktree.Manager, remote string, a queue.Args) bool {
	if a.Project != "" || a.Job.Base == "" || repo.HasCommit(ctx, a.Job.Base) {
		return true
	}
	ok, err := repo.RemoteHas(ctx, remote, worktree.BaseRef(a.RunID, a.TaskID, a.Attempt))
	return ok || err != nil
}
