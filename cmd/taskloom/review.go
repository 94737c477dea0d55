package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/verify"
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

// reviewActions are the actions of the product contract, in the order they are offered.
var reviewActions = []string{nodes.ActionFixed, nodes.ActionRetry, nodes.ActionSkip, nodes.ActionAbort}

// Validate checks the options.
func (o *reviewOpts) Validate() error {
	if o.RunID == "" {
		return usageError("review needs a run ID: taskloom review RUN_ID (see taskloom runs)")
	}
	if o.Action != "" && !slices.Contains(reviewActions, o.Action) {
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
			return o.Run(cmd.Context(), cmd, a.stdin, a.stdout, isInteractive(a.stdin, a.stdout))
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

// terminalReader is implemented by a stdin that stands for a terminal
// although it is not a character device; tests use it to drive the
// interactive review.
type terminalReader interface {
	IsTerminal() bool
}

// isInteractive reports whether the review can prompt: stdin and stdout
// are both terminals.
func isInteractive(in io.Reader, out io.Writer) bool {
	if t, ok := in.(terminalReader); ok {
		return t.IsTerminal()
	}
	fin, ok := in.(*os.File)
	if !ok {
		return false
	}
	fout, ok := out.(*os.File)
	return ok && isCharDevice(fin) && isCharDevice(fout) && isTerminal(out)
}

// isCharDevice reports whether f is a character device other than the null
// device (which is one, but nobody types into it).
func isCharDevice(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}

// escalation is one pending human_escalation interrupt with what the run
// knows about its task.
type escalation struct {
	interruptID string
	payload     nodes.EscalationPayload
	task        planner.Task
	attempt     *nodes.Attempt
}

// review is one review of a run: its pending escalations and the decisions
// taken so far.
type review struct {
	runID     string
	repo      string // the run's repository, for the git commands shown
	pending   []escalation
	tasks     []planner.Task // the tasks as the decisions so far leave them
	decisions map[string]nodes.Decision
}

// Run reviews the run: it records decisions from the flags or, with a
// terminal, from prompts, and resumes the run when asked to.
func (o *reviewOpts) Run(ctx context.Context, cmd *cobra.Command, in io.Reader, w io.Writer, interactive bool) error {
	s, err := openSession(ctx, cmd, o.Repo, "")
	if err != nil {
		return err
	}
	defer s.Close()
	run, _, err := s.loadRun(ctx, o.RunID)
	if err != nil {
		return err
	}
	g, err := s.graph()
	if err != nil {
		return err
	}
	res, err := g.State(ctx, o.RunID, -1)
	if err != nil {
		return fmt.Errorf("read run %s: %w", o.RunID, err)
	}
	rv, err := newReview(o.RunID, run.Repo, res)
	if err != nil {
		return err
	}
	selected, err := rv.selectTasks(o.Tasks)
	if err != nil {
		return err
	}
	var p *prompter
	switch {
	case o.Action != "":
		if err := rv.decideFromFlags(selected, o.Tasks, o.Action, o.Note); err != nil {
			return err
		}
	case interactive:
		p = newPrompter(ctx, in, w)
		if err := rv.decideInteractively(p, selected); err != nil {
			return err
		}
	default:
		rv.show(w, selected, false)
		return usageError("no terminal for an interactive review of run %s: pass --task ID --action fixed|retry|skip|abort [--note TEXT] [--resume]", o.RunID)
	}
	if err := rv.record(ctx, g, w); err != nil {
		return err
	}
	if !rv.complete() {
		if !o.Resume {
			return nil
		}
		// The run stays paused for review.
		fmt.Fprintf(w, "not resuming: the run resumes once every escalated task has a decision\n")
		return withCode(exitReview, nil)
	}
	resume := o.Resume
	if !resume && p != nil {
		// The decisions are recorded whatever the answer.
		resume, _ = p.confirm("Resume now?", false)
	}
	if !resume {
		fmt.Fprintf(w, "next: taskloom resume %s\n", o.RunID)
		return nil
	}
	return resumeRun(ctx, cmd, s, o.RunID, resumeHow{}, w)
}

// newReview collects the pending escalations of a run's newest checkpoint.
// repo is the run's repository.
func newReview(runID, repo string, res graph.Result[nodes.State]) (*review, error) {
	rv := &review{runID: runID, repo: repo, tasks: res.State.Tasks.Values(), decisions: map[string]nodes.Decision{}}
	for _, in := range res.Interrupts {
		if in.Node != nodes.NodeEscalation {
			continue
		}
		e := escalation{interruptID: in.ID}
		if err := in.Decode(&e.payload); err != nil {
			return nil, fmt.Errorf("run %s: escalation %s: %w", runID, in.ID, err)
		}
		e.task, _ = res.State.Tasks.Get(e.payload.TaskID)
		if e.payload.Attempt != "" {
			if a, ok := res.State.Attempts.Get(e.payload.Attempt); ok {
				e.attempt = &a
			}
		}
		rv.pending = append(rv.pending, e)
	}
	if len(rv.pending) > 0 {
		return rv, nil
	}
	if res.Status == graph.StatusPending && slices.Contains(res.Next, nodes.NodeEscalation) {
		return nil, fmt.Errorf("run %s has no pending escalation: its review decisions are recorded; continue it with taskloom resume %s", runID, runID)
	}
	return nil, fmt.Errorf("run %s is not waiting for a review (it is %s); nothing to decide", runID, nodes.StatusOf(res, nil))
}

// taskIDs lists the task IDs of escalations.
func taskIDs(escs []escalation) string {
	ids := make([]string, len(escs))
	for i, e := range escs {
		ids[i] = e.payload.TaskID
	}
	return strings.Join(ids, ", ")
}

// selectTasks returns the pending escalations of the tasks ids, or all of
// them when ids is empty.
func (rv *review) selectTasks(ids []string) ([]escalation, error) {
	if len(ids) == 0 {
		return rv.pending, nil
	}
	var out []escalation
	for _, id := range ids {
		n := 0
		for _, e := range rv.pending {
			if e.payload.TaskID == id {
				out = append(out, e)
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("task %s has no pending escalation in run %s (pending: %s)", id, rv.runID, taskIDs(rv.pending))
		}
	}
	return out, nil
}

// decideFromFlags takes the decision of --action for the selected tasks.
func (rv *review) decideFromFlags(selected []escalation, ids []string, action, note string) error {
	d := nodes.Decision{Action: action, Note: strings.TrimSpace(note)}
	if action == nodes.ActionAbort {
		rv.abort(d)
		return nil
	}
	if len(ids) == 0 && len(rv.pending) > 1 {
		return usageError("run %s has %d escalated tasks (%s): pass --task ID for each decision", rv.runID, len(rv.pending), taskIDs(rv.pending))
	}
	for _, e := range selected {
		if err := rv.decide(e, d); err != nil {
			return err
		}
	}
	return nil
}

// abort answers every pending escalation with d: the run ends aborted.
func (rv *review) abort(d nodes.Decision) {
	for _, e := range rv.pending {
		rv.decisions[e.interruptID] = d
	}
}

// decide checks that the pipeline can apply d to e's task, as
// human_escalation will, and takes it.
func (rv *review) decide(e escalation, d nodes.Decision) error {
	tasks, err := nodes.ApplyDecision(rv.tasks, e.payload.TaskID, d)
	if err != nil {
		return fmt.Errorf("cannot %s %s in run %s: %w", d.Action, e.payload.TaskID, rv.runID, err)
	}
	rv.tasks = tasks
	rv.decisions[e.interruptID] = d
	return nil
}

// complete reports whether every pending escalation has a decision.
func (rv *review) complete() bool {
	for _, e := range rv.pending {
		if _, ok := rv.decisions[e.interruptID]; !ok {
			return false
		}
	}
	return true
}

// record stores the decisions with one Answer and prints them.
func (rv *review) record(ctx context.Context, g *graph.Runnable[nodes.State], w io.Writer) error {
	if len(rv.decisions) == 0 {
		return fmt.Errorf("no decision taken for run %s; nothing was recorded", rv.runID)
	}
	values := make(map[string]any, len(rv.decisions))
	for id, d := range rv.decisions {
		values[id] = d
	}
	if err := g.Answer(ctx, rv.runID, values); err != nil {
		return busyMessage(rv.runID, fmt.Errorf("record the review of run %s: %w", rv.runID, err))
	}
	fmt.Fprintf(w, "recorded for run %s:\n", rv.runID)
	var left []escalation
	for _, e := range rv.pending {
		d, ok := rv.decisions[e.interruptID]
		if !ok {
			left = append(left, e)
			continue
		}
		line := fmt.Sprintf("  %-10s %s", e.payload.TaskID, d.Action)
		if d.Note != "" {
			line += fmt.Sprintf(" (note: %s)", d.Note)
		}
		fmt.Fprintln(w, line)
	}
	if len(left) > 0 {
		fmt.Fprintf(w, "still waiting for a decision: %s (taskloom review %s)\n", taskIDs(left), rv.runID)
	}
	return nil
}

// Limits of what the review shows of each text before cutting it.
const (
	reviewErrorLines = 20
	reviewDiffLines  = 30
	reviewTestLines  = 25
	reviewPageLines  = 40
)

// reasonText words an escalation reason for a person.
func reasonText(reason string) string {
	switch reason {
	case nodes.ReasonMaxAttempts:
		return "max attempts reached"
	case nodes.ReasonDeadlock:
		return "deadlock: no task can start"
	case nodes.ReasonCycle:
		return "dependency cycle"
	case nodes.ReasonConflict:
		return "merge conflict that persists after retries"
	case nodes.ReasonQuestion:
		return "the worker has a question"
	case nodes.ReasonBuild:
		return "build verification on main failed"
	}
	return reason
}

// testSummary sums up a verification in one line.
func testSummary(r verify.Verdict) string {
	var parts []string
	switch {
	case r.Passed:
		parts = append(parts, "passed")
	case r.TimedOut:
		parts = append(parts, "timed out")
	case r.Failed > 0:
		parts = append(parts, fmt.Sprintf("%d of %d failed", r.Failed, max(r.Total, r.Failed)))
	default:
		parts = append(parts, "failed")
	}
	if r.Format != "" {
		parts = append(parts, r.Format)
	}
	parts = append(parts, fmt.Sprintf("exit code %d", r.ExitCode))
	if len(r.MissingFiles) > 0 {
		parts = append(parts, "missing "+strings.Join(r.MissingFiles, ", "))
	}
	return strings.Join(parts, ", ")
}

// showCommand is the command that shows ref's whole diff in repo: git -C
// REPO show REF, or git show REF when the repo is not known.
func showCommand(repo, ref string) string {
	if repo == "" {
		return "git show " + ref
	}
	return fmt.Sprintf("git -C %s show %s", shellQuote(repo), ref)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '\\' ||
			('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// section is a titled text of an escalation's view.
type section struct {
	title string
	text  string
	limit int
}

func (e escalation) sections() []section {
	var out []section
	if e.payload.Error != "" {
		title := "error"
		if e.payload.Reason == nodes.ReasonQuestion {
			title = "question"
		}
		out = append(out, section{title: title, text: e.payload.Error, limit: reviewErrorLines})
	}
	a := e.attempt
	if a == nil {
		return out
	}
	if len(a.Conflicts) > 0 {
		out = append(out, section{title: "conflicting files", text: strings.Join(a.Conflicts, "\n"), limit: reviewErrorLines})
	}
	switch {
	case a.Diff != "":
		out = append(out, section{title: fmt.Sprintf("diff of attempt %d", a.Attempt), text: a.Diff, limit: reviewDiffLines})
	case a.Commit != "" || a.Worktree != "":
		out = append(out, section{title: fmt.Sprintf("diff of attempt %d", a.Attempt), text: "(the attempt changed nothing)", limit: 1})
	}
	// The error usually quotes the test output already; show it only when
	// it adds something.
	if a.Tests != nil {
		text := strings.TrimSpace(a.Tests.Output)
		if text != "" && !strings.Contains(e.payload.Error, text) {
			out = append(out, section{title: "test output", text: text, limit: reviewTestLines})
		}
	}
	return out
}

// show prints the escalations; full prints their texts uncut.
func (rv *review) show(w io.Writer, escs []escalation, full bool) {
	fmt.Fprintf(w, "run %s is paused for human review: %d escalated task(s)\n", rv.runID, len(rv.pending))
	for i, e := range escs {
		fmt.Fprintln(w)
		rv.showOne(w, e, i, len(escs), full)
	}
}

// showOne prints one escalation and reports whether a text was cut.
func (rv *review) showOne(w io.Writer, e escalation, i, n int, full bool) bool {
	title := e.payload.Title
	if title == "" {
		title = e.task.Title
	}
	fmt.Fprintf(w, "== [%d/%d] %s — %s\n", i+1, n, e.payload.TaskID, title)
	fmt.Fprintf(w, "reason:   %s\n", reasonText(e.payload.Reason))
	// The attempt number counts every attempt; max_attempts bounds the
	// failed ones since the last review.
	var used []string
	if e.task.MaxAttempts > 0 {
		used = append(used, fmt.Sprintf("%d of max_attempts %d failed", e.payload.Attempts, e.task.MaxAttempts))
	}
	if e.task.Status != "" {
		used = append(used, "status "+string(e.task.Status))
	}
	about := ""
	if len(used) > 0 {
		about = " (" + strings.Join(used, ", ") + ")"
	}
	if a := e.attempt; a != nil {
		fmt.Fprintf(w, "attempt:  %d, the last%s\n", a.Attempt, about)
		if e.payload.Ref != "" {
			fmt.Fprintf(w, "ref:      %s\n", e.payload.Ref)
			fmt.Fprintf(w, "diff:     %s\n", showCommand(rv.repo, e.payload.Ref))
		}
	} else {
		fmt.Fprintf(w, "attempt:  none yet%s\n", about)
	}
	if e.attempt != nil && e.attempt.Tests != nil {
		fmt.Fprintf(w, "tests:    %s\n", testSummary(*e.attempt.Tests))
	}
	cut := false
	for _, s := range e.sections() {
		fmt.Fprintf(w, "%s:\n", s.title)
		lines := strings.Split(strings.TrimRight(s.text, "\n"), "\n")
		shown := lines
		if !full && len(lines) > s.limit {
			shown = lines[:s.limit]
		}
		for _, l := range shown {
			fmt.Fprintf(w, "  │ %s\n", l)
		}
		if len(shown) < len(lines) {
			cut = true
			fmt.Fprintf(w, "  … %d more line(s) cut\n", len(lines)-len(shown))
		}
	}
	return cut
}

// decideInteractively asks for a decision on each selected escalation.
func (rv *review) decideInteractively(p *prompter, selected []escalation) error {
	fmt.Fprintf(p.out, "run %s is paused for human review: %d escalated task(s)\n", rv.runID, len(rv.pending))
	for i, e := range selected {
		fmt.Fprintln(p.out)
		cut := rv.showOne(p.out, e, i, len(selected), false)
		d, err := rv.ask(p, e, i, len(selected), cut)
		if err != nil {
			return err
		}
		if d.Action == nodes.ActionAbort {
			rv.abort(d)
			return nil
		}
		fmt.Fprintf(p.out, "→ %s %s\n", d.Action, e.payload.TaskID)
	}
	return nil
}

// ask prompts for e's decision until one is confirmed and allowed.
func (rv *review) ask(p *prompter, e escalation, i, n int, cut bool) (nodes.Decision, error) {
	menu := "[f]ixed  [r]etry  [s]kip  [a]bort"
	if cut {
		menu += "  [v]iew all"
	}
	for {
		answer, err := p.ask(fmt.Sprintf("%s: %s > ", e.payload.TaskID, menu))
		if err != nil {
			return nodes.Decision{}, err
		}
		var d nodes.Decision
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "f", "fixed":
			d.Action = nodes.ActionFixed
		case "r", "retry":
			d.Action = nodes.ActionRetry
			q := "note for the worker's next attempt (optional, Enter for none): "
			if e.payload.Reason == nodes.ReasonQuestion {
				q = "your answer to the worker's question (Enter for none): "
			}
			note, err := p.ask(q)
			if err != nil {
				return d, err
			}
			d.Note = strings.TrimSpace(note)
		case "s", "skip":
			d.Action = nodes.ActionSkip
		case "a", "abort":
			yes, err := p.confirm("Abort the whole run? Every escalated task is answered with abort.", false)
			if err != nil {
				return d, err
			}
			if yes {
				return nodes.Decision{Action: nodes.ActionAbort}, nil
			}
			continue
		case "v", "view":
			var b strings.Builder
			rv.showOne(&b, e, i, n, true)
			if err := p.page(b.String()); err != nil {
				return d, err
			}
			continue
		case "":
			continue
		default:
			fmt.Fprintln(p.out, "type f, r, s or a (then Enter)")
			continue
		}
		question := fmt.Sprintf("%s %s", strings.ToUpper(d.Action[:1])+d.Action[1:], e.payload.TaskID)
		if d.Note != "" {
			question += fmt.Sprintf(" with the note %q", d.Note)
		}
		yes, err := p.confirm(question+"?", true)
		if err != nil {
			return d, err
		}
		if !yes {
			continue
		}
		if err := rv.decide(e, d); err != nil {
			fmt.Fprintln(p.out, err)
			continue
		}
		return d, nil
	}
}

// prompter reads a person's answers line by line. A read blocks in its own
// goroutine so that an interrupt (ctx) ends the review at once.
type prompter struct {
	ctx   context.Context
	in    io.Reader
	out   io.Writer
	lines chan promptLine
	ended bool // the input ended
}

type promptLine struct {
	text string
	err  error
}

func newPrompter(ctx context.Context, in io.Reader, out io.Writer) *prompter {
	return &prompter{ctx: ctx, in: in, out: out}
}

// errReviewCancelled ends a review whose input ended, or that was
// interrupted, before its decisions were taken.
var errReviewCancelled = errors.New("review cancelled before all decisions were taken; nothing was recorded")

func (p *prompter) ask(prompt string) (string, error) {
	io.WriteString(p.out, prompt)
	if p.ended {
		fmt.Fprintln(p.out)
		return "", errReviewCancelled
	}
	if p.lines == nil {
		p.lines = make(chan promptLine)
		go func() {
			r := bufio.NewReader(p.in)
			for {
				text, err := r.ReadString('\n')
				if text != "" || err == nil {
					if !p.send(promptLine{text: strings.TrimRight(text, "\r\n")}) {
						return
					}
				}
				if err != nil {
					p.send(promptLine{err: err})
					return
				}
			}
		}()
	}
	select {
	case <-p.ctx.Done():
		fmt.Fprintln(p.out)
		return "", errReviewCancelled
	case l := <-p.lines:
		if l.err != nil {
			p.ended = true
			fmt.Fprintln(p.out)
			return "", errReviewCancelled
		}
		return l.text, nil
	}
}

// send hands a line to ask, unless the review is over.
func (p *prompter) send(l promptLine) bool {
	select {
	case p.lines <- l:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// confirm asks a yes/no question; Enter means def.
func (p *prompter) confirm(question string, def bool) (bool, error) {
	hint := "[y/N]"
	if def {
		hint = "[Y/n]"
	}
	for {
		answer, err := p.ask(question + " " + hint + " ")
		if err != nil {
			return false, err
		}
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "":
			return def, nil
		case "y", "yes":
			return true, nil
		case "n", "no":
			return false, nil
		}
	}
}

// page prints text a screen at a time.
func (p *prompter) page(text string) error {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for len(lines) > 0 {
		n := min(reviewPageLines, len(lines))
		for _, l := range lines[:n] {
			fmt.Fprintln(p.out, l)
		}
		lines = lines[n:]
		if len(lines) == 0 {
			break
		}
		answer, err := p.ask(fmt.Sprintf("-- %d more line(s): Enter for more, q to stop -- ", len(lines)))
		if err != nil {
			return err
		}
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(answer)), "q") {
			break
		}
	}
	return nil
}
