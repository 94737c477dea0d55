package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/internal/term"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/runview"
	"github.com/taskloom/taskloom/worktree"
)

// runOpts are the options of taskloom run.
type runOpts struct {
	Product, Repo, ConfigFile string
	JSON                      bool
	// Workers is --workers; the config reads it from the flag.
	Workers int
	// Dir is where relative paths were given (the working directory).
	Dir string
}

// Validate checks the options.
func (o *runOpts) Validate() error {
	if o.Product == "" {
		return usageError("run needs a PRODUCT.md: taskloom run PRODUCT.md")
	}
	if o.Workers < 0 {
		return usageError("--workers must be at least 0, got %d", o.Workers)
	}
	return productReadable(o.Product)
}

// productReadable refuses a PRODUCT.md that cannot be read, or is empty,
// before anything is opened or recorded.
func productReadable(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("PRODUCT.md %s cannot be read; pass the path of your product spec", path)
	}
	if strings.TrimSpace(string(data)) == "" {
		return planner.ErrEmpty(path)
	}
	return nil
}

func newRunCmd(a *app) *cobra.Command {
	o := &runOpts{}
	cmd := &cobra.Command{
		Use:   "run PRODUCT.md",
		Short: "Start a new run of the pipeline on a git repo",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runIDRunE(a, o, &o.Product),
	}
	f := cmd.Flags()
	f.StringVar(&o.Repo, "repo", ".", "the git repo to work on")
	f.StringVar(&o.ConfigFile, "config", "", "config file (default: <repo>/.project-config.json)")
	f.String("db", "", "store URL: postgres://… or a SQLite path (default: <repo>/.taskloom/taskloom.db)")
	f.String("model", "", "model spec: anthropic:…, openai:…, openai-compatible:MODEL@URL or scripted:PATH")
	f.IntVar(&o.Workers, "workers", 0, "parallel workers")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object per event")
	return cmd
}

// Run starts the run and drives it until it ends or pauses for review.
func (o *runOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	if o.Dir == "" {
		o.Dir, _ = os.Getwd()
	}
	s, err := openSession(ctx, cmd, o.Repo, o.ConfigFile, false)
	if err != nil {
		return err
	}
	defer s.Close()
	out, err := s.Start(ctx, session.StartOpts{Product: o.Product, ConfigFile: o.ConfigFile, Dir: o.Dir,
		View: viewFunc(w, o.JSON, nextFlags(cmd)), Warn: cmd.ErrOrStderr()})
	return finishRun(out, err, nextFlags(cmd), o.JSON)
}

// resumeOpts are the options of taskloom resume.
type resumeOpts struct {
	RunID, Repo, From string
	JSON, AcceptHead  bool
}

// Validate checks the options.
func (o *resumeOpts) Validate() error {
	if o.RunID == "" {
		return usageError("resume needs a run ID: taskloom resume RUN_ID (see taskloom runs)")
	}
	if n, err := strconv.ParseInt(o.From, 10, 64); o.From != "" && (err != nil || n < 0) {
		return usageError("--from %q: want a checkpoint step number from taskloom history", o.From)
	}
	return nil
}

func newResumeCmd(a *app) *cobra.Command {
	o := &resumeOpts{}
	cmd := &cobra.Command{
		Use:   "resume RUN_ID",
		Short: "Continue a run from its last checkpoint, after a crash, a kill or a review",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runIDRunE(a, o, &o.RunID),
	}
	f := cmd.Flags()
	addStoreFlags(f, &o.Repo)
	f.StringVar(&o.From, "from", "", "fork the run from this checkpoint (see taskloom history) and continue the fork")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object per event")
	f.BoolVar(&o.AcceptHead, "accept-head", false, "take the target branch as it is after a reset or rewrite: tasks whose commits are gone from it are redone")
	return cmd
}

// Run resumes the run.
func (o *resumeOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	s, err := openRunSession(ctx, cmd, o.Repo)
	if err != nil {
		return err
	}
	defer s.Close()
	return resumeRun(ctx, cmd, s, o.RunID, session.ResumeOpts{From: o.From, AcceptHead: o.AcceptHead}, o.JSON, w)
}

// resumeRun continues a stored run, shown on w.
func resumeRun(ctx context.Context, cmd *cobra.Command, s *session.Session, runID string, how session.ResumeOpts, asJSON bool, w io.Writer) error {
	how.View, how.Warn = viewFunc(w, asJSON, nextFlags(cmd)), cmd.ErrOrStderr()
	if !asJSON {
		how.Out = w
	}
	out, err := s.Resume(ctx, runID, how)
	return finishRun(out, err, nextFlags(cmd), asJSON)
}

// viewFunc shows a run on w: a live view on a terminal, plain lines
// otherwise, one JSON event per line with --json. The commands it prints
// carry next, the flags that find the run's store (nextFlags).
func viewFunc(w io.Writer, asJSON bool, next string) session.ViewFunc {
	return func(runID string, meta session.Meta) *runview.View {
		return runview.New(w, runview.Opts{RunID: runID, Model: meta.Model, Workers: meta.Workers, JSON: asJSON, NextFlags: next,
			Live: !asJSON && term.IsTerminal(w), NoColor: os.Getenv("NO_COLOR") != ""})
	}
}

// finishRun shows how the call ended and returns the error that carries
// its exit code. The commands it prints carry next, the flags that find the run's store (nextFlags).
// With --json, stdout holds only events: the command that resumes a
// stopped run goes to stderr.
func finishRun(out session.Outcome, err error, next string, asJSON bool) error {
	var reset *worktree.ResetError
	if errors.As(err, &reset) {
		reset.Flags = next
	}
	if out.View == nil {
		return err // it was never shown
	}
	res := out.Result
	status := nodes.StatusOf(res, err)
	if err != nil && res.Step < 0 && len(res.Next) == 0 && res.State.RunID.Get() == "" {
		status = "" // it never started
	}
	code := nodes.ExitCode(status)
	if err != nil && !errors.Is(err, context.Canceled) {
		code = exitError
	}
	out.View.Finish(res, status, code)
	switch {
	case errors.Is(err, context.Canceled) && asJSON:
		return withCode(exitInterrupted, fmt.Errorf("stopped; resume with: taskloom resume %s%s", out.RunID, next))
	case errors.Is(err, context.Canceled):
		return withCode(exitInterrupted, nil)
	case err == nil && code == exitOK:
		return nil
	case err == nil:
		return withCode(code, nil)
	case session.StoreFault(out.RunID, next, err) != nil:
		return session.StoreFault(out.RunID, next, err)
	case reset != nil:
		return reset // one line, without the nodes it went through
	case errors.Is(err, graph.ErrStepLimit):
		return fmt.Errorf("%w; resume it with: taskloom resume %s%s", err, out.RunID, next)
	case status == "":
		return err
	}
	return &session.StoppedError{RunID: out.RunID, Next: next, Err: err}
}
