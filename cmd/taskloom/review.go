package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/internal/review"
	"github.com/taskloom/taskloom/internal/session"
	"github.com/taskloom/taskloom/internal/term"
)

// reviewOpts are the options of taskloom review.
type reviewOpts struct {
	RunID string
	Repo  string
	// Tasks limits the review to these escalated tasks; with Action, they
	// are the tasks the decision is for.
	Tasks  []string
	Action string
	Note   string
	// Resume continues the run once every escalation has a decision.
	Resume bool
}

// Validate checks the options.
func (o *reviewOpts) Validate() error {
	if o.RunID == "" {
		return usageError("review needs a run ID: taskloom review RUN_ID (see taskloom runs)")
	}
	if o.Action != "" && !slices.Contains(review.Actions, o.Action) {
		return usageError("--action %q: want fixed, retry, skip or abort", o.Action)
	}
	if o.Action == "" && o.Note != "" {
		return usageError("--note goes with --action: taskloom review %s --task ID --action retry --note TEXT", o.RunID)
	}
	var ids []string
	for _, arg := range o.Tasks {
		for id := range strings.SplitSeq(arg, ",") {
			if id = strings.TrimSpace(id); id == "" {
				return usageError("--task %q: want a task ID, or several separated by commas", arg)
			}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	o.Tasks = ids
	return nil
}

func newReviewCmd(a *app) *cobra.Command {
	o := &reviewOpts{}
	cmd := &cobra.Command{
		Use:   "review RUN_ID",
		Short: "Review the escalated tasks of a run paused for human review",
		Long: `Review the escalated tasks of a run paused for human review (exit code 3).

On a terminal the review is interactive: each escalated task is shown with
its error, its last attempt's number, a git ref of that attempt's work
(refs/taskloom/attempts/RUN_ID/TASK_ID/ATTEMPT, kept until the run ends)
with the git show command for its whole diff, its diff and test output,
and you choose:
  fixed  I fixed it by hand: mark it completed and continue
  retry  give it max_attempts fresh attempts, optionally with a note for the
         worker (attempt numbers go on counting, so refs never repeat)
  skip   mark it skipped; its dependents become blocked unless also skipped
  abort  end the run as aborted
Without a terminal, pass the decision as flags:
  taskloom review RUN_ID --task ID --action fixed|retry|skip|abort [--note TEXT] [--resume]
The decisions are recorded; taskloom resume RUN_ID acts on them.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.RunID = args[0]
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd, a.stdin, a.stdout, term.IsInteractive(a.stdin, a.stdout))
		},
	}
	f := cmd.Flags()
	addStoreFlags(f, &o.Repo)
	f.StringArrayVar(&o.Tasks, "task", nil, "escalated task to decide on (repeatable or comma-separated; optional when only one task is escalated)")
	f.StringVar(&o.Action, "action", "", "decision: fixed, retry, skip or abort")
	f.StringVar(&o.Note, "note", "", "note for the worker's next attempt (with --action retry)")
	f.BoolVar(&o.Resume, "resume", false, "resume the run after recording the decision")
	return cmd
}

// Run reviews the run: it records decisions from the flags or, with a
// terminal, from prompts, and resumes the run when asked to.
func (o *reviewOpts) Run(ctx context.Context, cmd *cobra.Command, in io.Reader, w io.Writer, interactive bool) error {
	s, err := openRunSession(ctx, cmd, o.Repo)
	if err != nil {
		return err
	}
	defer s.Close()
	run, _, err := s.LoadRun(ctx, o.RunID)
	if err != nil {
		return err
	}
	g, err := s.Graph()
	if err != nil {
		return err
	}
	res, err := g.State(ctx, o.RunID, -1)
	if err != nil {
		return fmt.Errorf("read run %s: %w", o.RunID, err)
	}
	rv, err := review.New(o.RunID, run.Repo, nextFlags(cmd), res)
	if err != nil {
		return err
	}
	selected, err := rv.Select(o.Tasks)
	if err != nil {
		return err
	}
	var p *review.Prompter
	var usage review.UsageError
	switch {
	case o.Action != "":
		err = rv.DecideFromFlags(selected, o.Tasks, o.Action, o.Note)
	case interactive:
		p = review.NewPrompter(ctx, in, w)
		err = rv.DecideInteractively(p, selected)
	default:
		rv.Show(w, selected, false)
		return usageError("no terminal for an interactive review of run %s: pass --task ID --action fixed|retry|skip|abort [--note TEXT] [--resume]", o.RunID)
	}
	if errors.As(err, &usage) {
		return withCode(exitUsage, err)
	}
	if err != nil {
		return err
	}
	if err := rv.Record(ctx, g, w); err != nil {
		return err
	}
	resume := o.Resume
	switch {
	case !rv.Complete() && !resume:
		return nil
	case !rv.Complete():
		// The run stays paused for review.
		fmt.Fprintf(w, "not resuming: the run resumes once every escalated task has a decision\n")
		return withCode(exitReview, nil)
	case !resume && p != nil:
		// The decisions are recorded whatever the answer.
		resume, _ = p.Confirm("Resume now?", false)
	}
	if !resume {
		fmt.Fprintf(w, "next: taskloom resume %s%s\n", o.RunID, nextFlags(cmd))
		return nil
	}
	return resumeRun(ctx, cmd, s, o.RunID, session.ResumeOpts{}, false, w)
}
