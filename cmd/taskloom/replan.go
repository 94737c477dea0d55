package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

// replanOpts are the options of `taskloom replan`.
type replanOpts struct {
	RunID, Product, Repo  string
	Apply, FollowUp, JSON bool
}

func (o *replanOpts) Validate() error { return nil }

// Run prints the difference an edited PRODUCT.md makes to the run.
func (o *replanOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	s, err := openRunSession(ctx, cmd, o.Repo)
	if err != nil {
		return err
	}
	defer s.Close()
	run, meta, err := s.LoadRun(ctx, o.RunID)
	if err != nil {
		return err
	}
	g, err := s.Graph()
	if err != nil {
		return err
	}
	limits := session.PlannerLimits(s.Cfg)
	popts := &planner.Opts{Limits: &limits, Workers: meta.Workers, MaxAttempts: s.Cfg.MaxAttempts, Repo: run.Repo, ScheduleFunc: scheduler.PlanSchedule}
	model := func() (llms.Model, error) { return llm.New(ctx, meta.Model, session.LLMOpts(s.Cfg, nil)) }
	plan := func(ctx context.Context, current []planner.Task) (*planner.Plan, error) {
		popts.CurrentTasks = current
		return planner.FromProductFile(ctx, model, o.Product, popts)
	}
	res, err := nodes.Replan(ctx, g, o.RunID, plan, &nodes.ReplanOpts{Apply: o.Apply, FollowUps: o.FollowUp, Planner: popts})
	if err != nil {
		return session.BusyMessage(o.RunID, err)
	}
	if o.JSON {
		return writeJSON(w, res)
	}
	if err := res.WriteText(w); err != nil {
		return err
	}
	next := "nothing recorded: add --apply to record this replan\n"
	if res.Applied {
		next = fmt.Sprintf("recorded as checkpoint %d; continue with: taskloom resume %s%s\n", res.Checkpoint, o.RunID, nextFlags(cmd))
		if files := session.Uncommitted(ctx, run.Repo); len(files) > 0 {
			// The edited PRODUCT.md, most often: resume would refuse.
			next = fmt.Sprintf("recorded as checkpoint %d; commit %s first (resume integrates into that checkout), then continue with: taskloom resume %s%s\n",
				res.Checkpoint, strings.Join(files, ", "), o.RunID, nextFlags(cmd))
		}
	}
	_, err = io.WriteString(w, next)
	return err
}

func newReplanCmd(a *app) *cobra.Command {
	o := &replanOpts{}
	cmd := &cobra.Command{
		Use:   "replan RUN_ID PRODUCT.md",
		Short: "Plan an edited PRODUCT.md against a run and show (or, with --apply, record) the difference",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.RunID, o.Product = args[0], args[1]
			return optsRunE(a, o)(cmd, args)
		},
	}
	f := cmd.Flags()
	addStoreFlags(f, &o.Repo)
	f.BoolVar(&o.Apply, "apply", false, "record the replan as a checkpoint; taskloom resume then goes on with the new plan")
	f.BoolVar(&o.FollowUp, "follow-up", false, "add a follow-up task for each completed task that PRODUCT.md changed")
	f.BoolVar(&o.JSON, "json", false, "print the difference as JSON")
	return cmd
}
