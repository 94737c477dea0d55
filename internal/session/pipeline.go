package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/mcpclient"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
	"github.com/taskloom/taskloom/verify"
	"github.com/taskloom/taskloom/worktree"
)

// LLMOpts maps the config's llm keys onto the provider models' options.
func LLMOpts(cfg config.Config, wait func(llm.WaitInfo)) *llm.Opts {
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
		// The credentials the sandbox keeps from workers are kept from
		// the provider's error messages too, which may echo a request.
		Secrets: proc.NewRedactor(os.Environ(), cfg.Sandbox.EnvAllow).Credentials().Values(),
	}
}

// onWait passes a provider wait to the display, if one listens.
func (s *Session) onWait(w llm.WaitInfo) {
	if f := s.waits.Load(); f != nil {
		(*f)(w)
	}
}

// Meta is what a run keeps so that resume rebuilds the same pipeline.
type Meta struct {
	Model      string `json:"model"`
	Workers    int    `json:"workers"`
	ConfigFile string `json:"config_file,omitempty"`
	// TargetBranch and StartHead are the branch the run integrates into
	// and the head it started from (the runner records them).
	TargetBranch string `json:"target_branch,omitempty"`
	StartHead    string `json:"start_head,omitempty"`
	// ForkedFrom is the run a fork (resume --from) was taken from.
	ForkedFrom string `json:"forked_from,omitempty"`
	// newRun: the run starts now, on the branch checked out, which there
	// must be.
	newRun bool
}

func NewRunID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "r" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// ResolveModelSpec makes a scripted model's path absolute, so that a
// resume from another folder finds it. A relative path is looked up in the
// working directory first, then in the repo (where a config file names it).
func ResolveModelSpec(spec, cwd, repo string) string {
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

// Pipeline builds the pipeline of a run.
func (s *Session) Pipeline(ctx context.Context, runID, productPath string, meta Meta) (*nodes.Pipeline, error) {
	cfg := s.Cfg
	// A resumed run integrates into the branch it started on, whatever is
	// checked out now.
	repo, err := worktree.Open(ctx, s.Repo, &worktree.Opts{Include: cfg.Worktree.Include, MainBranch: meta.TargetBranch, NeedBranch: meta.newRun, Logger: s.Logger,
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
	model := sync.OnceValues(func() (llms.Model, error) { return llm.New(ctx, meta.Model, LLMOpts(cfg, s.onWait)) })
	limits := PlannerLimits(cfg)
	popts := &planner.Opts{Limits: &limits, Workers: meta.Workers, MaxAttempts: cfg.MaxAttempts, Logger: s.Logger,
		ScheduleFunc: scheduler.PlanSchedule, Repo: s.Repo, ProductName: productPath}
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
		Secrets:       proc.NewRedactor(append(os.Environ(), configSecrets(cfg, s.DBURL)...), cfg.Sandbox.EnvAllow),
		Logger:        s.Logger,
		CrashFunc:     crashFunc(),
	}, nil
}

// configSecrets returns the credentials the config holds, as NAME=value
// pairs a Redactor takes: the database's password, and MCP servers' env
// values and URL tokens. A worker can read the config file, and an
// attempt whose commit holds one of them is never committed, as with the
// environment's.
func configSecrets(cfg config.Config, dbURL string) []string {
	var out []string
	for _, u := range []string{cfg.Database.URL, dbURL} {
		for _, v := range config.URLSecrets(u) {
			out = append(out, "database.url (its password)="+v)
		}
	}
	for _, srv := range cfg.MCP.Servers {
		for name, v := range srv.Env {
			out = append(out, fmt.Sprintf("mcp.servers %s env %s=%s", srv.Name, name, v))
		}
		for _, v := range config.URLSecrets(srv.URL) {
			out = append(out, fmt.Sprintf("mcp.servers %s url (its token)=%s", srv.Name, v))
		}
	}
	return out
}

// worker builds the configured worker.
func (s *Session) worker(model func() (llms.Model, error), spec, runID string, vopts *verify.Opts, confine, cliConfine agent.ConfineFunc) (agent.Worker, error) {
	cfg := s.Cfg
	var w agent.Worker
	switch cfg.Worker.Kind {
	case config.WorkerCommand:
		cw, err := agent.NewCommandWorker(agent.CommandWorkerOpts{Argv: cfg.Worker.Command, Timeout: cfg.Worker.Timeout.Duration, Logger: s.Logger,
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
		a, err := agent.New(m, s.Store.Histories(runID), opts)
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
		StagnationLimit:   cfg.Worker.Ralph.Stagnation,
		TestsPassFunc:     ralphTests(cfg.Verify.Command, vopts),
		DiffFunc:          nodes.WorktreeDiff(confine),
		Logger:            s.Logger,
	})
}

func (s *Session) agentOpts() *agent.Opts {
	c := s.Cfg.Agent
	opts := &agent.Opts{
		Mode:                   s.Cfg.Worker.Mode,
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
	opts.Skills = &agent.SkillsOpts{RepoDir: s.Repo, Dirs: c.SkillsDirs}
	// The config's MCP servers, shared by the run's agents; a nil client
	// must not become a non-nil interface.
	if s.mcp == nil {
		s.mcp = mcpclient.FromConfig(s.Cfg, s.Repo, s.stderr)
	}
	if s.mcp != nil {
		opts.MCP = s.mcp
	}
	return opts
}

// Runner builds the runner of a run.
func (s *Session) Runner(p *nodes.Pipeline) *nodes.Runner {
	// The lease outlives an outage the run is willing to wait out: a run
	// stops when its lease would lapse.
	ttl := max(minLeaseTTL, s.Cfg.Database.RetryFor.Duration)
	return &nodes.Runner{Pipeline: p, Saver: s.Saver, Registry: s.Store, LeaseTTL: ttl, Logger: s.Logger}
}

// minLeaseTTL is the lease of a run whose database.retry_for is shorter.
const minLeaseTTL = 30 * time.Second

// PointFunc, when set, is called at the pipeline's named points (see
// nodes.Pipeline.CrashFunc) instead of crashFunc's kill: in-process
// end-to-end tests use it to act on the repo at exact places mid-run.
var PointFunc func(point string)

// crashFunc kills the process at a named point when TASKLOOM_CRASH_AT
// names it ("point" or "point#N" for its N-th passage). The end-to-end
// tests use it to kill -9 a run at exact places.
func crashFunc() func(string) {
	spec := os.Getenv("TASKLOOM_CRASH_AT")
	if spec == "" {
		return PointFunc
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

// Graph returns the pipeline graph on the session's store, for reading and
// answering runs without running them.
func (s *Session) Graph() (*graph.Runnable[nodes.State], error) {
	r := &nodes.Runner{Pipeline: &nodes.Pipeline{}, Saver: s.Saver, Logger: s.Logger}
	return r.Runnable()
}

// PlannerLimits maps the config's task_size_limits onto the planner's.
func PlannerLimits(cfg config.Config) planner.Limits {
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

// ralphTests is the Ralph loop's check of a try: what verify_task checks
// next, its files, its tests and the test command. A loop that stopped on
// less would hand on a try missing its files or its tests.
func ralphTests(command []string, opts *verify.Opts) func(context.Context, agent.Job) (bool, string, error) {
	return func(ctx context.Context, job agent.Job) (bool, string, error) {
		spec := verify.Spec{Command: command, TestFiles: job.Task.TestFiles, FilesToCreate: job.Task.FilesToCreate}
		v, err := verify.Run(ctx, job.Worktree, spec, opts)
		if err != nil {
			return false, "", err
		}
		return v.Passed, v.ErrorContext(4000), nil
	}
}
