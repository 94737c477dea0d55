// Package doctor checks what a run needs (git, the repo and its branch,
// the config, the store, the model's key, the verify command, the
// sandbox) and says what to fix. It only reads: it creates no store and
// sends nothing to a provider.
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/integrations/linear"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/internal/mcpclient"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/worktree"
)

// Check is one line of the doctor's report.
type Check struct {
	Name string
	// Level is "ok", "warn" or "fail".
	Level, Detail string
}

type report struct{ checks []Check }

func (r *report) add(name, level, format string, args ...any) {
	r.checks = append(r.checks, Check{name, level, fmt.Sprintf(format, args...)})
}

// LoadFunc loads the config a run in the repo at root would read.
type LoadFunc func(root string) (config.Config, error)

// Run checks the repo at repo, whose config load reads.
func Run(ctx context.Context, repo string, load LoadFunc) ([]Check, error) {
	r := &report{}
	if res, err := proc.Run(ctx, proc.Cmd{Args: []string{"git", "version"}, Env: worktree.GitEnv()}); err != nil || res.ExitCode != 0 {
		r.add("git", "fail", "git is not installed or does not run: install git 2.38 or later")
	} else {
		r.add("git", "ok", "%s", strings.TrimSpace(res.Stdout))
	}

	dir, err := filepath.Abs(repo)
	if err != nil {
		return nil, err
	}
	root, rerr := worktree.FindRoot(ctx, dir)
	switch {
	case errors.Is(rerr, worktree.ErrNotRepo):
		r.add("repo", "fail", "%s is not inside a git repository: cd into your repo or pass --repo", dir)
		root = dir
	case rerr != nil:
		r.add("repo", "fail", "%v", rerr)
		root = dir
	default:
		r.add("repo", "ok", "%s", root)
		r.checkBranch(ctx, root)
	}

	if cfg, cerr := load(root); cerr != nil {
		// The defaults are not what the user asked for: checking the
		// store or the model they name would pass or fail the wrong
		// thing.
		r.add("config", "fail", "%v", cerr)
		r.add("others", "warn", "store, model, verify, MCP and Linear not checked until the config loads")
	} else {
		r.add("config", "ok", "%s", configSource(root))
		r.checkStore(ctx, cfg, root, rerr == nil)
		if rerr == nil {
			r.checkWorkers(ctx, cfg, root)
		}
		r.checkModel(cfg)
		r.checkVerify(ctx, cfg, root)
		r.checkMCP(ctx, cfg, root)
		r.checkLinear(ctx, cfg)
	}

	if st := proc.Probe(); st.Complete() {
		r.add("sandbox", "ok", "%s", st)
	} else {
		r.add("sandbox", "warn", "%s", st)
	}
	return r.checks, nil
}

// Write prints one line per check and returns how many failed: a run
// cannot start until they are fixed.
func Write(w io.Writer, checks []Check) int {
	failed := 0
	for _, c := range checks {
		mark := map[string]string{"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[c.Level]
		fmt.Fprintf(w, "%s %-8s %s\n", mark, c.Name, c.Detail)
		if c.Level == "fail" {
			failed++
		}
	}
	return failed
}

// noCommit says that a branch has no commit yet, for a run needs a head
// to start its attempts from.
func noCommit(branch string) string {
	return fmt.Sprintf("%s has no commit yet: a run starts its attempts from one; make a first commit (git commit --allow-empty -m init)", branch)
}

func (r *report) checkBranch(ctx context.Context, root string) {
	res, err := proc.Run(ctx, proc.Cmd{Args: []string{"git", "symbolic-ref", "-q", "--short", "HEAD"}, Dir: root, Env: worktree.GitEnv()})
	branch := strings.TrimSpace(res.Stdout)
	if err != nil || res.ExitCode != 0 || branch == "" {
		r.add("branch", "fail", "HEAD is detached: check out the branch a run should integrate into")
		return
	}
	res, err = proc.Run(ctx, proc.Cmd{Args: []string{"git", "rev-parse", "-q", "--verify", "HEAD^{commit}"}, Dir: root, Env: worktree.GitEnv()})
	if err == nil && res.ExitCode != 0 {
		r.add("branch", "fail", "%s", noCommit(branch))
		return
	}
	res, err = proc.Run(ctx, proc.Cmd{Args: []string{"git", "status", "--porcelain", "--untracked-files=no"}, Dir: root, Env: worktree.GitEnv()})
	if err == nil && res.ExitCode == 0 && strings.TrimSpace(res.Stdout) != "" {
		r.add("branch", "fail", "%s has uncommitted changes to tracked files: commit or stash them", branch)
		return
	}
	r.add("branch", "ok", "%s (a run integrates here)", branch)
}

func (r *report) checkStore(ctx context.Context, cfg config.Config, root string, inRepo bool) {
	url := cfg.Database.URL
	if url == "" {
		if !inRepo {
			r.add("store", "warn", "not checked: the SQLite store lives in the repo (.taskloom/), and a run needs a git repo")
			return
		}
		path := session.DefaultDBURL(root)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			r.add("store", "ok", "SQLite at %s (the first run creates it)", path)
			return
		}
		url = path
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := session.OpenStore(cctx, url, &session.StoreOpts{SkipMigrate: true})
	if err != nil {
		r.add("store", "fail", "cannot open %s: %v; check --db / TASKLOOM_DB / database.url and that the database is up", config.RedactURL(url), err)
		return
	}
	_ = s.Close()
	r.add("store", "ok", "%s is reachable", config.RedactURL(url))
}

// checkWorkers says where a run's attempts go: with a PostgreSQL store and
// the shared remote, to the queue that `taskloom worker` processes on any
// machine take them from, which needs the remote reachable from here.
func (r *report) checkWorkers(ctx context.Context, cfg config.Config, root string) {
	if !postgres.IsURL(cfg.Database.URL) {
		return
	}
	remote := cfg.Worker.Remote
	res, err := proc.Run(ctx, proc.Cmd{Args: []string{"git", "config", "--get", "remote." + remote + ".url"}, Dir: root, Env: worktree.GitEnv()})
	url := strings.TrimSpace(res.Stdout)
	if err != nil || res.ExitCode != 0 || url == "" {
		r.add("workers", "warn", "the repo has no remote %q (worker.remote): attempts run in this process only; add the remote that `taskloom worker` clones share to spread them", remote)
		return
	}
	res, err = proc.Run(ctx, proc.Cmd{Args: []string{"git", "ls-remote", "--heads", remote}, Dir: root, Env: worktree.GitEnv(), Timeout: 15 * time.Second})
	if err != nil || res.ExitCode != 0 {
		r.add("workers", "fail", "cannot reach remote %s (%s): %s; attempts' bases are pushed there for `taskloom worker`", remote, config.RedactURL(url), clip.Line(res.Stderr, 0))
		return
	}
	r.add("workers", "ok", "attempts go to the queue in the database; `taskloom worker` clones fetch from and push to %s (%s)", remote, config.RedactURL(url))
}

func (r *report) checkModel(cfg config.Config) {
	spec, err := llm.ParseSpec(cfg.Model)
	if err != nil {
		r.add("model", "fail", "%v", err)
		return
	}
	var key string
	switch spec.Provider {
	case llm.ProviderScripted:
		if _, err := os.Stat(spec.Path); err != nil {
			if filepath.IsAbs(spec.Path) {
				r.add("model", "fail", "%s: the script is not there", spec)
			} else {
				r.add("model", "warn", "%s: the script is not there (a relative path is read from where the run starts)", spec)
			}
			return
		}
		if err := buildsModel(cfg); err != nil {
			r.add("model", "fail", "%v", err)
			return
		}
		r.add("model", "ok", "%s (offline, no key)", spec)
		return
	case llm.ProviderAnthropic:
		key = "ANTHROPIC_API_KEY"
	case llm.ProviderOpenAI:
		key = "OPENAI_API_KEY"
	default:
		if err := buildsModel(cfg); err != nil {
			r.add("model", "fail", "%v", err)
			return
		}
		r.add("model", "ok", "%s (sends a key only from llm.api_key_env)", spec)
		return
	}
	if os.Getenv(key) == "" {
		if cfg.Worker.Kind == config.WorkerCommand {
			// The external agent brings its own model; only a PRODUCT.md
			// without a task list needs this one, for the breakdown.
			r.add("model", "warn", "%s: %s is not set; a PRODUCT.md without a task list needs it for the breakdown", spec, key)
			return
		}
		r.add("model", "fail", "%s needs %s: export it (it never reaches output, logs, checkpoints or histories)", spec, key)
		return
	}
	if err := buildsModel(cfg); err != nil {
		r.add("model", "fail", "%v", err)
		return
	}
	r.add("model", "ok", "%s, %s is set", spec, key)
}

// buildsModel builds the model as a run does, which calls nothing: what a
// run refuses at its start (a key bound for plain http, say), doctor
// reports too.
func buildsModel(cfg config.Config) error {
	_, err := llm.New(context.Background(), cfg.Model, session.LLMOpts(cfg, nil))
	return err
}

func (r *report) checkVerify(ctx context.Context, cfg config.Config, root string) {
	if len(cfg.Verify.Command) == 0 {
		r.add("verify", "ok", "derived from each task's test files")
	} else {
		r.checkCommand(ctx, cfg, root, "verify", "verify.command", cfg.Verify.Command)
	}
	if len(cfg.BuildVerification.Command) > 0 {
		r.checkCommand(ctx, cfg, root, "build", "build_verification.command", cfg.BuildVerification.Command)
	}
}

// checkCommand looks for a command's program in the PATH the sandbox
// gives it.
func (r *report) checkCommand(ctx context.Context, cfg config.Config, root, name, key string, argv []string) {
	if config.GoWithoutModule(root, argv) {
		// In a project of another kind, every task would fail on it
		// before a test ran and use up its attempts. A repo with no
		// project file yet may get its go.mod from the first task.
		p := config.DetectProject(root)
		if nested, _ := filepath.Glob(filepath.Join(root, "*", "go.mod")); p.Kind == "" && len(nested) > 0 {
			rel, _ := filepath.Rel(root, nested[0])
			r.add(name, "fail", "%s runs go at the repo's top, which has no go.mod (%s is in a folder): set %s to run it there, e.g. [\"sh\", \"-c\", \"cd %s && %s\"]",
				key, filepath.ToSlash(rel), key, filepath.ToSlash(filepath.Dir(rel)), strings.Join(argv, " "))
			return
		}
		if p.Kind == "" {
			r.add(name, "warn", "%s runs go, but the repo has no go.mod yet: fine if the first task creates one, else set %s to the command that runs your tests", key, key)
			return
		}
		fix := "set it to " + strings.Join(p.VerifyHere(func(argv []string) bool { return RunnerWorks(ctx, root, argv) }), " ")
		if name == "build" {
			fix = "set it to [] (the tests are the build check) or to your build command"
		}
		r.add(name, "fail", "%s runs go, but this repo, %s, has no go.mod: %s", key, p, fix)
		return
	}
	env := proc.ReduceEnv(os.Environ(), cfg.Sandbox.EnvAllow)
	if !onPath(ctx, env, argv[0]) {
		r.add(name, "fail", "%s is not found in the sandbox's PATH: install it, or set %s", argv[0], key)
		return
	}
	if problem := runnerProblem(ctx, env, root, argv); problem != "" {
		r.add(name, "fail", "%s: %s, or set %s", strings.Join(argv, " "), problem, key)
		return
	}
	r.add(name, "ok", "%s", strings.Join(argv, " "))
}

// RunnerWorks reports whether argv, a test command, can run in the repo at
// root with the sandbox's default environment: its program is on the PATH
// and, for the runners init writes, it can find its tests' runner.
func RunnerWorks(ctx context.Context, root string, argv []string) bool {
	env := proc.ReduceEnv(os.Environ(), proc.DefaultEnvAllow)
	return onPath(ctx, env, argv[0]) && runnerProblem(ctx, env, root, argv) == ""
}

// onPath reports whether the shell finds program with env's PATH.
func onPath(ctx context.Context, env []string, program string) bool {
	res, err := proc.Run(ctx, proc.Cmd{Args: []string{"sh", "-c", `command -v "$1"`, "sh", program}, Env: env})
	return err == nil && res.ExitCode == 0
}

// runnerProblem says why a test runner that init may write cannot run in
// the repo at root, or "": a python without pytest, an npm project
// without a test script. Each would fail every task before a test ran.
func runnerProblem(ctx context.Context, env []string, root string, argv []string) string {
	switch {
	case len(argv) >= 3 && argv[1] == "-m" && argv[2] == "pytest":
		res, err := proc.Run(ctx, proc.Cmd{Args: []string{argv[0], "-m", "pytest", "--version"}, Dir: root, Env: env})
		if err != nil || res.ExitCode != 0 {
			return argv[0] + " cannot import pytest: install pytest for it (apt install python3-pytest, or pip install pytest)"
		}
	case filepath.Base(argv[0]) == "npm" && (slices.Equal(argv[1:], []string{"test"}) || slices.Equal(argv[1:], []string{"run", "test"})):
		data, err := os.ReadFile(filepath.Join(root, "package.json"))
		if err != nil {
			return "the repo has no package.json"
		}
		var pkg struct {
			Scripts map[string]string `json:"scripts"`
		}
		test := ""
		if json.Unmarshal(data, &pkg) == nil {
			test = pkg.Scripts["test"]
		}
		if test == "" || strings.Contains(test, "no test specified") {
			return "package.json has no test script: add one (jest, vitest, node --test…)"
		}
	}
	return ""
}

// checkMCP starts each MCP server as a run would, with its handshake and
// the listing of its tools: a command that is found may still fail to
// start, and a port that answers may not speak MCP. A server that is down
// only costs the agent its tools (a run still starts): a warning.
func (r *report) checkMCP(ctx context.Context, cfg config.Config, root string) {
	if len(cfg.MCP.Servers) == 0 {
		return
	}
	opts := mcpclient.ConfigOpts(cfg, root)
	opts.StartTimeout = mcpStartTimeout
	c := mcpclient.New(opts)
	defer c.Close()
	for _, s := range c.Servers(ctx) {
		name := "mcp " + s.Name
		if s.Err != nil {
			r.add(name, "warn", "%s (the agent runs without this server's tools until it starts)", clip.Line(s.Err.Error(), 0))
			continue
		}
		r.add(name, "ok", "%d tools, %d resources", len(s.Tools), len(s.Resources))
	}
}

// mcpStartTimeout bounds doctor's wait for a server: a run waits longer
// (mcpclient's default), but a check should answer soon.
const mcpStartTimeout = 10 * time.Second

// checkLinear checks the Linear sync when it is on: the key, and that
// Linear knows the team with it. A sync that cannot work leaves the run
// going without it: a warning.
func (r *report) checkLinear(ctx context.Context, cfg config.Config) {
	l := cfg.Integrations.Linear
	if !l.Enabled {
		return
	}
	key := os.Getenv(linear.KeyEnv)
	if key == "" {
		r.add("linear", "warn", "%s is not set: runs go on without the Linear sync", linear.KeyEnv)
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := linear.NewClient(l.URL, key).TeamStates(lctx, l.TeamID); err != nil {
		r.add("linear", "warn", "%s: runs go on without the Linear sync until this is fixed", clip.Line(err.Error(), 200))
		return
	}
	r.add("linear", "ok", "team %s, %s is set", l.TeamID, linear.KeyEnv)
}

// configSource says which config file a repo's run would read.
func configSource(root string) string {
	path := filepath.Join(root, config.FileName)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	return "defaults (no " + config.FileName + ")"
}
