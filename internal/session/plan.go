package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
	"github.com/taskloom/taskloom/worktree"
)

// PlanOpts says what Plan plans: a PRODUCT.md or, instead, a raw tasks
// JSON file.
type PlanOpts struct {
	Product, Tasks string
	// GetenvFunc reads environment variables for the model; nil means
	// os.Getenv.
	GetenvFunc func(string) string
	// Logger receives the breakdown's warnings; nil discards them.
	Logger *slog.Logger
	// Repo is a folder of the repository the plan is for; "" or a folder
	// outside git means none (see planner.Opts.Repo).
	Repo string
}

// Plan builds the plan a run of cfg would make. A PRODUCT.md without an
// explicit task list needs cfg's model. A plan that has problems (a
// dependency cycle) is returned with an error that says how to fix them;
// without a plan, the error says why there is none.
func Plan(ctx context.Context, cfg config.Config, o PlanOpts) (*planner.Plan, error) {
	limits := PlannerLimits(cfg)
	popts := &planner.Opts{Limits: &limits, Workers: cfg.ParallelWorkers, MaxAttempts: cfg.MaxAttempts, Logger: o.Logger,
		ScheduleFunc: scheduler.PlanSchedule}
	if o.Repo != "" {
		if root, err := worktree.FindRoot(ctx, o.Repo); err == nil {
			popts.Repo = root
		}
	}
	var p *planner.Plan
	var perr error
	if o.Tasks != "" {
		data, err := os.ReadFile(o.Tasks)
		if err != nil {
			return nil, err
		}
		if p, perr = planner.FromRaw(data, popts); p == nil {
			return nil, fmt.Errorf("%s: %w", o.Tasks, perr)
		}
	} else {
		data, err := os.ReadFile(o.Product)
		if err != nil {
			return nil, err
		}
		var model llms.Model
		if !planner.HasTaskList(string(data)) {
			lo := LLMOpts(cfg, nil)
			lo.GetenvFunc = o.GetenvFunc
			if model, err = llm.New(ctx, cfg.Model, lo); err != nil {
				return nil, planner.NeedsModel(o.Product, string(data), fmt.Errorf("%w; pass --model SPEC (for example scripted:session.json), set TASKLOOM_MODEL or the config's model", err))
			}
		}
		// Markdown errors and warnings name the file and line themselves.
		popts.ProductName = o.Product
		if p, perr = planner.FromProduct(ctx, model, string(data), popts); p == nil {
			if strings.HasPrefix(perr.Error(), o.Product+":") {
				return nil, perr
			}
			return nil, fmt.Errorf("%s: %w", o.Product, perr)
		}
	}
	if errors.Is(perr, planner.ErrCycle) {
		return p, fmt.Errorf("%w; remove one dependency of each cycle (file-based dependencies count: a task that modifies or tests a file depends on its creator)", perr)
	}
	return p, perr
}
