package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/verify"
	"github.com/taskloom/taskloom/worktree"
)

// session is what run, resume, review, status and history share: the
// repo's config and its store.
type session struct {
	cfg    config.Config
	repo   string
	dbURL  string
	saver  checkpoint.Saver
	store  *nodes.Store
	logger *slog.Logger
	// waits hears of every wait for the model provider, once the
	// progress display is there to show it.
	waits atomic.Pointer[func(llm.WaitInfo)]
}

// llmOpts maps the config's llm keys onto the provider models' options.
func llmOpts(cfg config.Config, wait func(llm.WaitInfo)) *llm.Opts {
	retries := cfg.LLM.MaxRetries
	if retries == 0 {
		retries = -1 // llm.Opts reads 0 as its default
	}
	return &llm.Opts{
		MaxTokens:         cfg.LLM.MaxTokens,
		RequestTimeout:    cfg.LLM.RequestTimeout.Duration,
		MaxRetries:        retries,
		RequestsPerMinute: cfg.LLM.RequestsPerMinute,
		NoPromptCache:     !cfg.LLM.PromptCache,
		APIKeyEnv:         cfg.LLM.APIKeyEnv,
		WaitFunc:          wait,
	}
}

// onWait passes a provider wait to the display, if one listens.
func (s *session) onWait(w llm.WaitInfo) {
	if f := s.waits.Load(); f != nil {
		(*f)(w)
	}
}

// defaultDBURL is the embedded store of a repo.
func defaultDBURL(repo string) string {
	return filepath.Join(repo, ".taskloom", "taskloom.db")
}

// errNoStore says that a read-only command found no store to read: the
// repo has had no run yet.
var errNoStore = errors.New("no taskloom runs yet")

// openSession loads the repo's config and opens its store, creating the
// repo's embedded store when it has none. The repo must be a git repo.
func openSession(ctx context.Context, cmd *cobra.Command, repoDir, configFile string) (*session, error) {
	return newSession(ctx, cmd, repoDir, configFile, false)
}

// openReadSession is openSession for the read-only commands: it never
// creates a store or a .taskloom folder (a repo without one has no runs:
// errNoStore), and with a --db it needs no git repo.
func openReadSession(ctx context.Context, cmd *cobra.Command, repoDir, configFile string) (*session, error) {
	return newSession(ctx, cmd, repoDir, configFile, true)
}

func newSession(ctx context.Context, cmd *cobra.Command, repoDir, configFile string, readOnly bool) (*session, error) {
	repo, err := filepath.Abs(repoDir)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(repo); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("repo %s is not a directory; pass --repo DIR", repoDir)
	}
	cfg, err := loadConfig(cmd, repo, configFile)
	if err != nil {
		return nil, err
	}
	s := &session{cfg: cfg, repo: repo, logger: slog.New(slog.DiscardHandler)}
	s.dbURL = cfg.Database.URL
	if s.dbURL == "" || !readOnly {
		if _, err := worktree.FindRoot(ctx, repo); errors.Is(err, worktree.ErrNotRepo) {
			return nil, fmt.Errorf("%s is not inside a git repository: cd into your repo or pass --repo", repo)
		} else if err != nil {
			return nil, err
		}
	}
	if s.dbURL == "" {
		s.dbURL = defaultDBURL(repo)
		if readOnly {
			if _, err := os.Stat(s.dbURL); errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%w in %s: start one with taskloom run PRODUCT.md", errNoStore, repo)
			}
		} else if err := os.MkdirAll(filepath.Dir(s.dbURL), 0o755); err != nil {
			return nil, err
		}
	}
	// A read-only command never creates tables in a database that has
	// none: it says that there are no runs there.
	d, err := openStore(ctx, s.dbURL, &storeOpts{Retry: storeRetry(cfg, cmd.ErrOrStderr()), ReadOnly: readOnly})
	if err != nil {
		return nil, err
	}
	s.saver = d
	if s.store, err = nodes.NewStore(d); err != nil {
		_ = d.Close()
		return nil, err
	}
	if readOnly {
		if _, err := s.store.Runs(ctx); errors.Is(err, store.ErrNoSchema) {
			_ = s.Close()
			return nil, fmt.Errorf("%w in %s: start one with taskloom run PRODUCT.md --db URL", errNoStore, config.RedactURL(s.dbURL))
		}
	}
	return s, nil
}

func (s *session) Close() error {
	err := s.store.Close()
	if cerr := s.saver.Close(); err == nil {
		err = cerr
	}
	return err
}

// runMeta is what a run keeps so that resume rebuilds the same pipeline.
type runMeta struct {
	Model      string `json:"model"`
	Workers    int    `json:"workers"`
	ConfigFile string `json:"config_file,omitempty"`
	// TargetBranch and StartHead are the branch the run integrates into
	// and the head it started from (the runner records them).
	TargetBranch string `json:"target_branch,omitempty"`
	StartHead    string `json:"start_head,omitempty"`
}

func newRunID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "r" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// resolveModelSpec makes a scripted model's path absolute, so that a
// resume from another folder finds it. A relative path is looked up in the
// working directory first, then in the repo (where a config file names it).
func resolveModelSpec(spec, cwd, repo string) string {
	path, ok := strings.CutPrefix(spec, "scripted:")
	if !ok || filepath.IsAbs(path) {
		return spec
	}
	if _, err := os.Stat(filepath.Join(cwd, path)); err != nil {
		if _, err := os.Stat(filepath.Join(repo, path)); err == nil {
			return "scripted:" + filepath.Join(repo, path)
		}
	}
	return "scripted:" + filepath.Join(cwd, path)
}

// pipeline builds the pipeline of a run.
func (s *session) pipeline(ctx context.Context, runID, productPath string, meta runMeta) (*nodes.Pipeline, error) {
	cfg := s.cfg
	// A resumed run integrates into the branch it started on, whatever is
	// checked out now.
	repo, err := worktree.Open(ctx, s.repo, &worktree.Opts{Include: cfg.Worktree.Include, MainBranch: meta.TargetBranch, Logger: s.logger,
		// The workers run confined (below); where Landlock enforces it they
		// cannot move refs, so the guard leaves the user's ref changes be.
		ConfinedRefs: proc.Probe().Landlock > 0})
	if err != nil {
		return nil, err
	}
	// The model is built when something needs it: the agent worker, or a
	// breakdown of a PRODUCT.md without a task list. An external agent
	// CLI on a task list needs no model (and no API key).
	// One model per run: its workers share its limiter, so a 429 slows
	// them all.
	model := sync.OnceValues(func() (llms.Model, error) { return llm.New(ctx, meta.Model, llmOpts(cfg, s.onWait)) })
	limits := plannerLimits(cfg)
	popts := &planner.Opts{Limits: &limits, Workers: meta.Workers, MaxAttempts: cfg.MaxAttempts, Logger: s.logger,
		ScheduleFunc: scheduler.PlanSchedule}
	sandbox := worktree.ConfineOpts{EnvAllow: cfg.Sandbox.EnvAllow, Network: cfg.Sandbox.Network}
	confine := func(dir string) (proc.Confinement, error) { return repo.Confine(dir, sandbox) }
	vopts := &verify.Opts{Timeout: cfg.Verify.Timeout.Duration, ConfineFunc: confine}
	// An external agent CLI needs its provider key and the network; its
	// writes are confined all the same.
	cliSandbox := sandbox
	cliSandbox.Keep, cliSandbox.Network = llm.KeyVariables(), true
	if cfg.LLM.APIKeyEnv != "" {
		cliSandbox.Keep = append(cliSandbox.Keep, cfg.LLM.APIKeyEnv)
	}
	cliConfine := func(dir string) (proc.Confinement, error) { return repo.Confine(dir, cliSandbox) }
	worker, err := s.worker(model, meta.Model, runID, vopts, confine, cliConfine)
	if err != nil {
		return nil, err
	}
	return &nodes.Pipeline{
		RunID: runID,
		PlanFunc: func(ctx context.Context) (*planner.Plan, error) {
			data, err := os.ReadFile(productPath)
			if err != nil {
				return nil, fmt.Errorf("read PRODUCT.md: %w", err)
			}
			if planner.HasTaskList(string(data)) {
				// Its errors name the file and the line.
				raw, err := planner.ParseTaskListFile(productPath, string(data))
				if err != nil {
					return nil, err
				}
				return planner.Build(raw, popts)
			}
			m, err := model()
			if err != nil {
				return nil, err
			}
			meter := llm.NewMeter(m, meta.Model)
			plan, err := planner.FromProduct(ctx, meter, string(data), popts)
			if plan != nil {
				plan.Usage = meter.Usage()
			}
			return plan, err
		},
		Repo:          repo,
		Worker:        worker,
		VerifyCommand: cfg.Verify.Command,
		VerifyOpts:    vopts,
		BuildCommand:  cfg.BuildVerification.Command,
		Workers:       meta.Workers,
		MaxAttempts:   cfg.MaxAttempts,
		WorkerTimeout: cfg.Worker.Timeout.Duration,
		Secrets:       proc.NewRedactor(os.Environ(), cfg.Sandbox.EnvAllow),
		Logger:        s.logger,
		CrashFunc:     crashFunc(),
	}, nil
}

// worker builds the configured worker.
func (s *session) worker(model func() (llms.Model, error), spec, runID string, vopts *verify.Opts, confine, cliConfine agent.ConfineFunc) (agent.Worker, error) {
	cfg := s.cfg
	var w agent.Worker
	switch cfg.Worker.Kind {
	case config.WorkerCommand:
		cw, err := agent.NewCommandWorker(agent.CommandWorkerOpts{Argv: cfg.Worker.Command, Timeout: cfg.Worker.Timeout.Duration, Logger: s.logger,
			ConfineFunc: cliConfine})
		if err != nil {
			return nil, err
		}
		w = cw
	default:
		m, err := model()
		if err != nil {
			return nil, err
		}
		opts := s.agentOpts()
		opts.Model = spec // prices the usage
		opts.ConfineFunc = confine
		a, err := agent.New(m, s.store.Histories(runID), opts)
		if err != nil {
			return nil, err
		}
		w = agent.NewAgentWorker(a, &agent.AgentWorkerOpts{Mode: cfg.Worker.Mode})
	}
	if !cfg.Worker.Ralph.Enabled {
		return w, nil
	}
	return agent.NewRalph(w, agent.RalphOpts{
		MaxIterations:     cfg.Worker.Ralph.MaxIterations,
		CompletionPromise: cfg.Worker.Ralph.CompletionPromise,
		TestsPassFunc: func(ctx context.Context, dir string) (bool, string, error) {
			v, err := verify.Run(ctx, dir, verify.Spec{Command: cfg.Verify.Command}, vopts)
			if err != nil {
				return false, "", err
			}
			return v.Passed, v.ErrorContext(4000), nil
		},
		DiffFunc: nodes.WorktreeDiff,
		Logger:   s.logger,
	})
}

func (s *session) agentOpts() *agent.Opts {
	c := s.cfg.Agent
	opts := &agent.Opts{
		Mode:                   s.cfg.Worker.Mode,
		MaxTurns:               c.MaxTurns,
		MaxConsecutiveMistakes: c.MaxConsecutiveMistakes,
		MaxTokens:              c.TokenBudget,
		MaxCostUSD:             c.CostBudgetUSD,
		CommandPolicy:          agent.CommandPolicy{Allow: c.CommandAllow, Deny: c.CommandDeny},
		CommandTimeout:         c.CommandTimeout.Duration,
		AllowOpenTodos:         !c.RequireTodosDone,
		ContextWindow:          c.ContextWindow,
		CondenseThreshold:      c.CondenseThreshold,
	}
	for _, m := range c.CustomModes {
		opts.CustomModes = append(opts.CustomModes, agent.Mode{Slug: m.Slug, Name: m.Name, Role: m.Role, Groups: m.Groups, FileRegex: m.FileRegex})
	}
	// The repo's .taskloom/skills is read from the repo itself: git leaves
	// the excluded .taskloom/ out of the worktrees. skills_dirs add to the
	// default locations.
	opts.Skills = &agent.SkillsOpts{RepoDir: s.repo, Dirs: c.SkillsDirs}
	return opts
}

// runner builds the runner of a run.
func (s *session) runner(p *nodes.Pipeline) *nodes.Runner {
	// The lease outlives an outage the run is willing to wait out: a run
	// stops when its lease would lapse.
	ttl := max(minLeaseTTL, s.cfg.Database.RetryFor.Duration)
	return &nodes.Runner{Pipeline: p, Saver: s.saver, Registry: s.store, LeaseTTL: ttl, Logger: s.logger}
}

// minLeaseTTL is the lease of a run whose database.retry_for is shorter.
const minLeaseTTL = 30 * time.Second

// storeRetry says how the store rides out an outage: retried for
// database.retry_for, and the run says once per outage, on stderr, that it
// waits.
func storeRetry(cfg config.Config, stderr io.Writer) *checkpoint.RetryOpts {
	var mu sync.Mutex
	return &checkpoint.RetryOpts{
		For: cfg.Database.RetryFor.Duration,
		UnreachableFunc: func(err error, retryFor time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(stderr, "taskloom: store unreachable (%s); retrying for up to %s\n", firstLineOf(err.Error()), shortDuration(retryFor))
		},
	}
}

// shortDuration prints d without zero units: 2m, 1m30s, 2s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// loadRun returns a stored run and its meta.
func (s *session) loadRun(ctx context.Context, runID string) (nodes.Run, runMeta, error) {
	run, err := s.store.Run(ctx, runID)
	if err != nil {
		if errors.Is(err, nodes.ErrRunNotFound) {
			return run, runMeta{}, fmt.Errorf("run %s not found in %s; pass --db or --repo for the store that holds it", runID, checkpoint.MaskURL(s.dbURL))
		}
		return run, runMeta{}, err
	}
	var meta runMeta
	if len(run.Meta) > 0 {
		if err := json.Unmarshal(run.Meta, &meta); err != nil {
			return run, meta, fmt.Errorf("run %s: bad meta: %w", runID, err)
		}
	}
	return run, meta, nil
}

// pointFunc, when set, is called at the pipeline's named points (see
// nodes.Pipeline.CrashFunc) instead of crashFunc's kill: in-process
// end-to-end tests use it to act on the repo at exact places mid-run.
var pointFunc func(point string)

// crashFunc kills the process at a named point when TASKLOOM_CRASH_AT
// names it ("point" or "point#N" for its N-th passage). The end-to-end
// tests use it to kill -9 a run at exact places.
func crashFunc() func(string) {
	spec := os.Getenv("TASKLOOM_CRASH_AT")
	if spec == "" {
		return pointFunc
	}
	point, nth, _ := strings.Cut(spec, "#")
	want := 1
	if nth != "" {
		fmt.Sscan(nth, &want)
	}
	seen := 0
	return func(p string) {
		if p != point {
			return
		}
		seen++
		if seen == want {
			killSelf()
		}
	}
}

// graph returns the pipeline graph on the session's store, for reading and
// answering runs without running them.
func (s *session) graph() (*graph.Runnable[nodes.State], error) {
	r := &nodes.Runner{Pipeline: &nodes.Pipeline{}, Saver: s.saver, Logger: s.logger}
	return r.Runnable()
}

// plannerLimits maps the config's task_size_limits onto the planner's.
func plannerLimits(cfg config.Config) planner.Limits {
	l := cfg.TaskSizeLimits
	return planner.Limits{
		MaxFilesToCreate:    l.MaxFilesToCreate,
		MaxFilesToModify:    l.MaxFilesToModify,
		MaxCriteriaPerTask:  l.MaxCriteriaPerTask,
		MaxInputTokens:      l.MaxInputTokens,
		MaxTimeMinutes:      float64(l.MaxTimeMinutes),
		ComplexityThreshold: l.ComplexityThreshold,
		AutoSplit:           l.AutoSplit,
	}
}
