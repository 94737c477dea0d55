package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/internal/session"
)

// planOpts are the options of `taskloom plan`.
type planOpts struct {
	// Product is the PRODUCT.md to break down; exclusive with Tasks.
	Product string
	// Tasks is a raw tasks JSON file; exclusive with Product.
	Tasks string
	// Model is the model spec for the breakdown; empty means TASKLOOM_MODEL.
	Model string
	// Repo is the repository whose .project-config.json applies; empty
	// means the current directory.
	Repo string
	// ConfigFile is the config file to use instead of Repo's
	// .project-config.json.
	ConfigFile string
	// JSON and Mermaid select the output; neither means a table.
	JSON    bool
	Mermaid bool
	// Workers is the number of workers the schedule assumes; 0 means the
	// config's parallel_workers, as run uses it.
	Workers int
	// GetenvFunc reads environment variables; nil means os.Getenv.
	GetenvFunc func(string) string
	// Logger receives the breakdown's warnings; nil discards them.
	Logger *slog.Logger
}

// Validate implements the command options contract. Its errors are usage
// errors (exit 2).
func (o *planOpts) Validate() error {
	switch {
	case o.Product == "" && o.Tasks == "":
		return usageError("plan: give a PRODUCT.md to break down, or --tasks RAW.json")
	case o.Product != "" && o.Tasks != "":
		return usageError("plan: give either a PRODUCT.md or --tasks RAW.json, not both")
	case o.JSON && o.Mermaid:
		return usageError("plan: --json and --mermaid cannot be used together")
	case o.Workers < 0:
		return usageError("plan: --workers must be at least 1, got %d", o.Workers)
	}
	if o.Product != "" {
		if err := productReadable(o.Product); err != nil {
			return err
		}
	}
	if o.GetenvFunc == nil {
		o.GetenvFunc = os.Getenv
	}
	if o.Repo == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("plan: find the current directory: %w", err)
		}
		o.Repo = wd
	}
	return nil
}

// Run builds the plan and prints it to w. A plan with dependency cycles is
// printed too, and then reported as an error. The config is read as run
// reads it: cmd's flags (--model, --workers), then TASKLOOM_* variables,
// then the config file, then the defaults.
func (o *planOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	cfg, err := session.LoadConfig(cmd.Flags(), o.Repo, o.ConfigFile)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	p, perr := session.Plan(ctx, cfg, session.PlanOpts{Product: o.Product, Tasks: o.Tasks, GetenvFunc: o.GetenvFunc, Logger: o.Logger, Repo: o.Repo})
	if p == nil {
		return fmt.Errorf("plan: %w", perr)
	}
	switch {
	case o.JSON:
		err = writeJSON(w, p)
	case o.Mermaid:
		err = p.WriteMermaid(w)
	default:
		err = p.WriteTable(w)
	}
	if err = errors.Join(err, perr); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}

func newPlanCmd(a *app) *cobra.Command {
	opts := planOpts{}
	cmd := &cobra.Command{
		Use:   "plan [PRODUCT.md]",
		Short: "Break a PRODUCT.md (or a raw task list) down into a plan and print it",
		Long: "Break a PRODUCT.md down into a plan and print it: tasks, complexity, splits,\n" +
			"dependencies, milestones, warnings and the estimated makespan with N workers.\n" +
			"A PRODUCT.md with an explicit task list needs no model; otherwise --model (or\n" +
			"TASKLOOM_MODEL, or the config's model) names it. --tasks RAW.json plans a raw\n" +
			"task list instead. The config is read as run reads it (--config, else the\n" +
			"repo's .project-config.json; TASKLOOM_* variables and flags override it):\n" +
			"task_size_limits, max_attempts and parallel_workers, the schedule's workers.\n" +
			"The text form ends with the parallel waves a run would start.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Product = args[0]
			}
			// The breakdown's re-asks are reported on stderr as they happen.
			opts.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{
				Level: slog.LevelWarn,
				ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
					if len(groups) == 0 && a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			}))
			if cmd.Flags().Changed("workers") && (opts.Workers < 1 || opts.Workers > config.MaxWorkers) {
				return usageError("plan: --workers must be from 1 to %d, got %d", config.MaxWorkers, opts.Workers)
			}
			if err := opts.Validate(); err != nil {
				return err
			}
			return opts.Run(cmd.Context(), cmd, a.stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Tasks, "tasks", "", "plan this raw tasks JSON file instead of a PRODUCT.md")
	f.StringVar(&opts.Model, "model", "", "model spec for the breakdown (anthropic:…, openai:…, openai-compatible:MODEL@URL, scripted:PATH)")
	f.StringVar(&opts.Repo, "repo", "", "repository whose .project-config.json applies (default: the current directory)")
	f.StringVar(&opts.ConfigFile, "config", "", "config file to use instead of the repo's .project-config.json")
	f.BoolVar(&opts.JSON, "json", false, "print the plan as JSON")
	f.BoolVar(&opts.Mermaid, "mermaid", false, "print the dependency graph as a Mermaid flowchart")
	f.IntVar(&opts.Workers, "workers", 0, "number of parallel workers for the schedule estimate (default: the config's parallel_workers)")
	return cmd
}
