package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/worktree"
)

// doctorOpts are the options of taskloom doctor.
type doctorOpts struct {
	Repo string
}

func newDoctorCmd(a *app) *cobra.Command {
	o := &doctorOpts{}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what a run needs (git, repo, store, model key, verify command, sandbox) and say what to fix",
		Args:  cobra.NoArgs,
		RunE:  optsRunE(a, o),
	}
	f := cmd.Flags()
	f.StringVar(&o.Repo, "repo", ".", "the git repo to check")
	f.String("db", "", "store URL: postgres://… or a SQLite path (default: <repo>/.taskloom/taskloom.db)")
	f.String("model", "", "model spec to check the key of (default: the config's)")
	return cmd
}

// Validate implements the command options contract.
func (o *doctorOpts) Validate() error {
	if o.Repo == "" {
		o.Repo = "."
	}
	return nil
}

// check is one line of the doctor's report.
type check struct {
	name string
	// level is "ok", "warn" or "fail".
	level, detail string
}

// Run prints one line per check and fails (exit 1) when a run could not
// start. It only reads: it creates no store and sends nothing to a
// provider.
func (o *doctorOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	var checks []check
	add := func(name, level, format string, args ...any) {
		checks = append(checks, check{name, level, fmt.Sprintf(format, args...)})
	}

	if res, err := proc.Run(ctx, proc.Cmd{Args: []string{"git", "version"}, Env: worktree.GitEnv()}); err != nil || res.ExitCode != 0 {
		add("git", "fail", "git is not installed or does not run: install git 2.38 or later")
	} else {
		add("git", "ok", "%s", strings.TrimSpace(res.Stdout))
	}

	dir, err := filepath.Abs(o.Repo)
	if err != nil {
		return err
	}
	root, rerr := worktree.FindRoot(ctx, dir)
	switch {
	case errors.Is(rerr, worktree.ErrNotRepo):
		add("repo", "fail", "%s is not inside a git repository: cd into your repo or pass --repo", dir)
		root = dir
	case rerr != nil:
		add("repo", "fail", "%v", rerr)
		root = dir
	default:
		add("repo", "ok", "%s", root)
		o.checkBranch(ctx, root, add)
	}

	cfg, cerr := loadConfig(cmd, root, "")
	if cerr != nil {
		add("config", "fail", "%v", cerr)
		cfg = config.Default()
	} else {
		add("config", "ok", "%s", configSource(root))
	}
	o.checkStore(ctx, cfg, root, rerr == nil, add)
	o.checkModel(cfg, add)
	o.checkVerify(cfg, add)

	st := proc.Probe()
	if st.Complete() {
		add("sandbox", "ok", "%s", st)
	} else {
		add("sandbox", "warn", "%s", st)
	}

	failed := 0
	for _, c := range checks {
		mark := map[string]string{"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[c.level]
		fmt.Fprintf(w, "%s %-8s %s\n", mark, c.name, c.detail)
		if c.level == "fail" {
			failed++
		}
	}
	if failed > 0 {
		return withCode(exitError, fmt.Errorf("%d check(s) failed: a run cannot start until they are fixed", failed))
	}
	fmt.Fprintln(w, "a run can start")
	return nil
}

func (o *doctorOpts) checkBranch(ctx context.Context, root string, add func(name, level, format string, args ...any)) {
	res, err := proc.Run(ctx, proc.Cmd{Args: []string{"git", "symbolic-ref", "-q", "--short", "HEAD"}, Dir: root, Env: worktree.GitEnv()})
	branch := strings.TrimSpace(res.Stdout)
	if err != nil || res.ExitCode != 0 || branch == "" {
		add("branch", "fail", "HEAD is detached: check out the branch a run should integrate into")
		return
	}
	res, err = proc.Run(ctx, proc.Cmd{Args: []string{"git", "status", "--porcelain", "--untracked-files=no"}, Dir: root, Env: worktree.GitEnv()})
	if err == nil && res.ExitCode == 0 && strings.TrimSpace(res.Stdout) != "" {
		add("branch", "fail", "%s has uncommitted changes to tracked files: commit or stash them", branch)
		return
	}
	add("branch", "ok", "%s (a run integrates here)", branch)
}

func (o *doctorOpts) checkStore(ctx context.Context, cfg config.Config, root string, inRepo bool, add func(name, level, format string, args ...any)) {
	url := cfg.Database.URL
	if url == "" {
		if !inRepo {
			add("store", "fail", "no store: outside a git repo a run needs --db")
			return
		}
		path := defaultDBURL(root)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			add("store", "ok", "SQLite at %s (the first run creates it)", path)
			return
		}
		url = path
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := openStore(cctx, url, &storeOpts{SkipMigrate: true})
	if err != nil {
		add("store", "fail", "cannot open %s: %v; check --db / TASKLOOM_DB / database.url and that the database is up", config.RedactURL(url), err)
		return
	}
	_ = s.Close()
	add("store", "ok", "%s is reachable", config.RedactURL(url))
}

func (o *doctorOpts) checkModel(cfg config.Config, add func(name, level, format string, args ...any)) {
	spec, err := llm.ParseSpec(cfg.Model)
	if err != nil {
		add("model", "fail", "%v", err)
		return
	}
	var key string
	switch spec.Provider {
	case llm.ProviderScripted:
		if _, err := os.Stat(spec.Path); err != nil {
			add("model", "warn", "%s: the script is not there (a relative path is read from where the run starts)", spec)
			return
		}
		add("model", "ok", "%s (offline, no key)", spec)
		return
	case llm.ProviderAnthropic:
		key = "ANTHROPIC_API_KEY"
	case llm.ProviderOpenAI:
		key = "OPENAI_API_KEY"
	default:
		add("model", "ok", "%s (sends a key only from llm.api_key_env)", spec)
		return
	}
	if os.Getenv(key) == "" {
		if cfg.Worker.Kind == config.WorkerCommand {
			// The external agent brings its own model; only a PRODUCT.md
			// without a task list needs this one, for the breakdown.
			add("model", "warn", "%s: %s is not set; a PRODUCT.md without a task list needs it for the breakdown", spec, key)
			return
		}
		add("model", "fail", "%s needs %s: export it (it never reaches output, logs, checkpoints or histories)", spec, key)
		return
	}
	add("model", "ok", "%s, %s is set", spec, key)
}

func (o *doctorOpts) checkVerify(cfg config.Config, add func(name, level, format string, args ...any)) {
	argv := cfg.Verify.Command
	if len(argv) == 0 {
		add("verify", "ok", "derived from each task's test files")
		return
	}
	env := proc.ReduceEnv(os.Environ(), cfg.Sandbox.EnvAllow)
	res, err := proc.Run(context.Background(), proc.Cmd{Args: []string{"sh", "-c", `command -v "$1"`, "sh", argv[0]}, Env: env})
	if err != nil || res.ExitCode != 0 {
		add("verify", "fail", "%s is not found in the sandbox's PATH: install it, or set verify.command", argv[0])
		return
	}
	add("verify", "ok", "%s", strings.Join(argv, " "))
}

// configSource says which config file a repo's run would read.
func configSource(root string) string {
	path := filepath.Join(root, config.FileName)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	return "defaults (no " + config.FileName + ")"
}
