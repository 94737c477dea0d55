package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/worktree"
)

func shortHash(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// runOpts are the options of taskloom run.
type runOpts struct {
	Product    string
	Repo       string
	ConfigFile string
	JSON       bool
	// Dir is where relative paths were given (the working directory).
	Dir string
}

// Validate checks the options.
func (o *runOpts) Validate() error {
	if o.Product == "" {
		return usageError("run needs a PRODUCT.md: taskloom run PRODUCT.md")
	}
	if st, err := os.Stat(o.Product); err != nil || st.IsDir() {
		return fmt.Errorf("PRODUCT.md %s cannot be read; pass the path of your product spec", o.Product)
	}
	return nil
}

func newRunCmd(a *app) *cobra.Command {
	o := &runOpts{}
	cmd := &cobra.Command{
		Use:   "run PRODUCT.md",
		Short: "Start a new run of the pipeline on a git repo",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Product = args[0]
			}
			o.Dir, _ = os.Getwd()
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd, a.stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Repo, "repo", ".", "the git repo to work on")
	f.StringVar(&o.ConfigFile, "config", "", "config file (default: <repo>/.project-config.json)")
	f.String("db", "", "store URL: postgres://… or a SQLite path (default: <repo>/.taskloom/taskloom.db)")
	f.String("model", "", "model spec: anthropic:…, openai:…, openai-compatible:MODEL@URL or scripted:PATH")
	f.Int("workers", 0, "parallel workers")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object per event")
	return cmd
}

// Run starts the run and drives it until it ends or pauses for review.
func (o *runOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	s, err := openSession(ctx, cmd, o.Repo, o.ConfigFile)
	if err != nil {
		return err
	}
	defer s.Close()
	product, err := filepath.Abs(o.Product)
	if err != nil {
		return err
	}
	meta := runMeta{Model: resolveModelSpec(s.cfg.Model, o.Dir, s.repo), Workers: s.cfg.ParallelWorkers, ConfigFile: o.ConfigFile}
	runID := newRunID(time.Now())
	p, err := s.pipeline(ctx, runID, product, meta)
	if err != nil {
		return err
	}
	// One live run per repo and branch, held while this process lives.
	unlock, err := p.Repo.LockBranch(ctx, runID)
	if err != nil {
		return err
	}
	defer unlock()
	metaJSON, _ := json.Marshal(meta)
	v := newView(w, o.JSON, runID, meta)
	wait := v.ProviderWait
	s.waits.Store(&wait)
	v.Started(product, s.repo, p.Repo.MainBranch(), false)
	warnSandbox(cmd.ErrOrStderr())
	ctx, opts := watched(ctx, v)
	res, err := s.runner(p).Start(ctx, nodes.Run{ID: runID, ProductPath: product, Repo: s.repo, Meta: metaJSON}, opts)
	return finishRun(v, runID, res, err)
}

// resumeOpts are the options of taskloom resume.
type resumeOpts struct {
	RunID      string
	Repo       string
	From       string
	JSON       bool
	ConfigFile string
	// AcceptHead takes the run's target branch as it is, after the user
	// reset or rewrote it.
	AcceptHead bool
}

// Validate checks the options.
func (o *resumeOpts) Validate() error {
	if o.RunID == "" {
		return usageError("resume needs a run ID: taskloom resume RUN_ID (see taskloom runs)")
	}
	if o.From != "" {
		if _, err := strconv.ParseInt(o.From, 10, 64); err != nil {
			return usageError("--from %q: want a checkpoint step number from taskloom history", o.From)
		}
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
	s, err := openSession(ctx, cmd, o.Repo, o.ConfigFile)
	if err != nil {
		return err
	}
	defer s.Close()
	return resumeRun(ctx, cmd, s, o.RunID, resumeHow{From: o.From, JSON: o.JSON, AcceptHead: o.AcceptHead}, w)
}

// resumeHow says how resumeRun continues a run.
type resumeHow struct {
	From       string // fork from this checkpoint step first
	JSON       bool
	AcceptHead bool
}

// resumeRun continues a stored run (or a fork of it) with its own pipeline.
func resumeRun(ctx context.Context, cmd *cobra.Command, s *session, runID string, how resumeHow, w io.Writer) error {
	run, meta, err := s.loadRun(ctx, runID)
	if err != nil {
		return err
	}
	if run.Repo != s.repo {
		// The run's repo has the config the run was made with.
		cfg, err := loadConfig(cmd, run.Repo, meta.ConfigFile)
		if err != nil {
			return err
		}
		s.cfg, s.repo = cfg, run.Repo
	}
	if how.From != "" {
		step, _ := strconv.ParseInt(how.From, 10, 64)
		runID, err = forkRun(ctx, s, run, meta, step)
		if err != nil {
			return err
		}
		run.ID = runID
	}
	p, err := s.pipeline(ctx, run.ID, run.ProductPath, meta)
	if err != nil {
		return err
	}
	// One live run per repo and branch: this one, while this process
	// lives. A second resume of the same run is told who drives it.
	unlock, err := p.Repo.LockBranch(ctx, run.ID)
	var live *worktree.LiveError
	if errors.As(err, &live) && live.Run == run.ID {
		return fmt.Errorf("run %s is being driven by another process (pid %d, host %s); wait for it to finish or stop it", run.ID, live.PID, live.Host)
	}
	if err != nil {
		return err
	}
	defer unlock()
	v := newView(w, how.JSON, run.ID, meta)
	wait := v.ProviderWait
	s.waits.Store(&wait)
	v.Started("", "", p.Repo.MainBranch(), true)
	warnSandbox(cmd.ErrOrStderr())
	runner := s.runner(p)
	if how.AcceptHead {
		acc, err := runner.AcceptHead(ctx, run.ID)
		if err != nil {
			return err
		}
		if len(acc.Redo) > 0 && !how.JSON {
			fmt.Fprintf(w, "accepted %s at %s; redoing %s, whose commits are gone from it\n", p.Repo.MainBranch(), shortHash(acc.Head), strings.Join(acc.Redo, ", "))
		}
	} else if err := runner.CheckHead(ctx, run.ID); err != nil {
		return err
	}
	if g, err := runner.Runnable(); err == nil {
		if st, err := g.State(ctx, run.ID, -1); err == nil {
			v.Seed(st.State)
		}
	}
	ctx, opts := watched(ctx, v)
	res, err := runner.Resume(ctx, run.ID, opts)
	return finishRun(v, run.ID, res, busyMessage(run.ID, err))
}

// forkRun starts a new run from a checkpoint of run.
func forkRun(ctx context.Context, s *session, run nodes.Run, meta runMeta, step int64) (string, error) {
	newID := newRunID(time.Now())
	p, err := s.pipeline(ctx, newID, run.ProductPath, meta)
	if err != nil {
		return "", err
	}
	g, err := s.runner(p).Runnable()
	if err != nil {
		return "", err
	}
	if err := g.Fork(ctx, run.ID, step, newID); err != nil {
		return "", fmt.Errorf("fork run %s at checkpoint %d: %w", run.ID, step, err)
	}
	// The fork has its own worktrees and trailers.
	if _, err := g.UpdateState(ctx, newID, "", nodes.State{RunID: graph.V(newID)}); err != nil {
		return "", err
	}
	fork := run
	fork.ID = newID
	if err := s.store.CreateRun(ctx, fork); err != nil {
		return "", err
	}
	return newID, nil
}

// busyMessage words a lease conflict as the documentation does.
func busyMessage(runID string, err error) error {
	var busy *checkpoint.BusyError
	if errors.As(err, &busy) {
		return fmt.Errorf("run %s is being driven by another process (%s); wait for it to finish or stop it", runID, busy.Holder)
	}
	return err
}

// warnSandbox says on stderr, right after the run ID, what of the sandbox
// this machine cannot enforce.
func warnSandbox(w io.Writer) {
	if st := proc.Probe(); !st.Complete() {
		fmt.Fprintf(w, "taskloom: warning: %s\n", st)
	}
}
