package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
)

// defaultHistoryLimit is how many of the newest checkpoints history shows
// without --all. Each shown checkpoint costs a state read.
const defaultHistoryLimit = 200

// historyOpts are the options of taskloom history.
type historyOpts struct {
	RunID      string
	Repo       string
	ConfigFile string
	JSON       bool
	// All shows every checkpoint; otherwise the newest Limit.
	All   bool
	Limit int
	// Task, Attempt and Export select the conversations to export: task
	// Task's attempt Attempt (0: its last), written under Export.
	Task    string
	Attempt int
	Export  string
}

// Validate checks the options.
func (o *historyOpts) Validate() error {
	switch {
	case o.RunID == "":
		return usageError("history needs a run ID: taskloom history RUN_ID (see taskloom runs)")
	case o.Export != "" && o.Task == "":
		return usageError("--export needs --task ID: taskloom history RUN_ID --task ID --export DIR")
	case o.Task != "" && o.Export == "":
		return usageError("--task needs --export DIR: taskloom history RUN_ID --task ID --export DIR")
	case o.Attempt < 0:
		return usageError("--attempt must be at least 1, got %d", o.Attempt)
	case o.Attempt > 0 && o.Task == "":
		return usageError("--attempt needs --task ID and --export DIR")
	case o.Limit < 1:
		return usageError("--limit must be at least 1, got %d", o.Limit)
	}
	if o.Repo == "" {
		o.Repo = "."
	}
	return nil
}

func newHistoryCmd(a *app) *cobra.Command {
	o := &historyOpts{}
	cmd := &cobra.Command{
		Use:   "history RUN_ID",
		Short: "List a run's checkpoints, or export a task attempt's agent conversations",
		Long: "List a run's checkpoints (step, node, time, summary); taskloom resume RUN_ID --from STEP forks the run from one.\n" +
			"With --task ID --export DIR, write that task's agent conversations of its last attempt (or --attempt N) to DIR.",
		Args: cobra.MaximumNArgs(1),
		RunE: runIDRunE(a, o, &o.RunID),
	}
	f := cmd.Flags()
	addStoreFlags(f, &o.Repo)
	f.BoolVar(&o.JSON, "json", false, "print the checkpoints as a JSON array")
	f.BoolVar(&o.All, "all", false, "show every checkpoint, not only the newest --limit")
	f.IntVar(&o.Limit, "limit", defaultHistoryLimit, "how many of the newest checkpoints to show")
	f.StringVar(&o.Task, "task", "", "the task whose conversations --export writes")
	f.IntVar(&o.Attempt, "attempt", 0, "the attempt to export, numbered as in its conversation IDs and Taskloom-Task trailers (default: the last)")
	f.StringVar(&o.Export, "export", "", "write the conversations to this folder")
	return cmd
}

// Run prints the run's checkpoints, or exports conversations.
func (o *historyOpts) Run(ctx context.Context, cmd *cobra.Command, w io.Writer) error {
	s, err := openReadSession(ctx, cmd, o.Repo, o.ConfigFile)
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
	if o.Export != "" {
		return o.export(ctx, s, g, run, w)
	}
	return o.list(ctx, g, run, w)
}

// historyEntry is a line of taskloom history.
type historyEntry struct {
	Step    int64        `json:"step"`
	Source  string       `json:"source"`
	Nodes   []string     `json:"nodes"`
	Time    time.Time    `json:"time"`
	Summary string       `json:"summary"`
	Changes []taskChange `json:"changes"`
	// Log is the run log's lines this step added.
	Log []string `json:"log"`
	// Usage is what the step's model calls used, when they used any.
	Usage *llm.Usage `json:"usage,omitempty"`
}

// taskChange is a task's status change in one step.
type taskChange struct {
	TaskID string `json:"task_id"`
	From   string `json:"from"`
	To     string `json:"to"`
}

func (o *historyOpts) list(ctx context.Context, g *graph.Runnable[nodes.State], run nodes.Run, w io.Writer) error {
	infos, err := g.History(ctx, run.ID, 0)
	if err != nil {
		return fmt.Errorf("history of run %s: %w", run.ID, err)
	}
	total := len(infos)
	if !o.All && len(infos) > o.Limit {
		infos = infos[:o.Limit]
	}
	slices.Reverse(infos) // oldest first
	entries, err := summarizeHistory(ctx, g, run.ID, infos)
	if err != nil {
		return err
	}
	if o.JSON {
		return writeJSON(w, entries)
	}
	if total == 0 {
		fmt.Fprintf(w, "run %s has no checkpoints yet\n", run.ID)
		return nil
	}
	if len(entries) < total {
		fmt.Fprintf(w, "run %s: the newest %d of %d checkpoints (--all shows all)\n", run.ID, len(entries), total)
	} else {
		fmt.Fprintf(w, "run %s: %d checkpoints\n", run.ID, total)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tNODE\tTIME\tSUMMARY")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Step, nodesLabel(e.Nodes, e.Source), localTime(e.Time), e.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "fork from a checkpoint with taskloom resume %s --from STEP\n", run.ID)
	return nil
}

// nodesLabel names a step's writers, counting repeats ("implement×2").
func nodesLabel(writers []string, source string) string {
	if len(writers) == 0 {
		return "(" + source + ")"
	}
	var parts []string
	for _, n := range dedupe(writers) {
		c := 0
		for _, m := range writers {
			if m == n {
				c++
			}
		}
		if c > 1 {
			n += "×" + strconv.Itoa(c)
		}
		parts = append(parts, n)
	}
	return strings.Join(parts, ",")
}

// summarizeHistory describes each checkpoint by comparing the state it
// holds with the state of the step before. infos are in step order.
func summarizeHistory(ctx context.Context, g *graph.Runnable[nodes.State], runID string, infos []graph.CheckpointInfo) ([]historyEntry, error) {
	entries := make([]historyEntry, 0, len(infos))
	var prev nodes.State
	havePrev := false
	if len(infos) > 0 && infos[0].Step > 0 && infos[0].Source != "fork" {
		res, err := g.State(ctx, runID, infos[0].Step-1)
		switch {
		case err == nil:
			prev, havePrev = res.State, true
		case errors.Is(err, checkpoint.ErrNotFound): // pruned
		default:
			return nil, fmt.Errorf("history of run %s: %w", runID, err)
		}
	}
	for i, info := range infos {
		res, err := g.State(ctx, runID, info.Step)
		if err != nil {
			return nil, fmt.Errorf("history of run %s: %w", runID, err)
		}
		if i > 0 && infos[i-1].Step != info.Step-1 {
			havePrev = false
		}
		if info.Step == 0 {
			// The first checkpoint: a new run's input, or a fork's copy.
			prev, havePrev = nodes.State{}, info.Source != "fork"
		}
		e := summarizeStep(info, prev, res.State, havePrev)
		entries = append(entries, e)
		prev, havePrev = res.State, true
	}
	return entries, nil
}

// summarizeStep describes one checkpoint: its task status changes, the
// plan, escalations and outcome it recorded, or else the first log line
// it added. Without the previous state (pruned), only the log is used.
func summarizeStep(info graph.CheckpointInfo, prev, cur nodes.State, havePrev bool) historyEntry {
	e := historyEntry{Step: info.Step, Source: info.Source, Nodes: info.Writers, Time: info.CreatedAt,
		Changes: []taskChange{}, Log: []string{}}
	if e.Nodes == nil {
		e.Nodes = []string{}
	}
	var parts []string
	if info.Source == "fork" {
		var m struct {
			From string `json:"forked_from"`
			Step int64  `json:"step"`
		}
		if json.Unmarshal(info.Meta, &m) == nil && m.From != "" {
			parts = append(parts, fmt.Sprintf("forked from run %s at checkpoint %d", m.From, m.Step))
		}
	}
	if !havePrev {
		prev = cur
		if n := cur.Log.Len(); n > 0 {
			// Without the step before, the newest log line is the best guess.
			e.Log = append(e.Log, cur.Log.Items()[n-1].Text)
		}
	} else if n, m := prev.Log.Len(), cur.Log.Len(); m > n {
		for _, en := range cur.Log.Items()[n:] {
			e.Log = append(e.Log, en.Text)
		}
	}
	var planned []string
	for _, t := range cur.Tasks.Values() {
		old, ok := prev.Tasks.Get(t.ID)
		if !ok {
			planned = append(planned, t.ID)
			continue
		}
		if old.Status != t.Status {
			e.Changes = append(e.Changes, taskChange{TaskID: t.ID, From: string(old.Status), To: string(t.Status)})
		}
	}
	if len(planned) > 0 {
		parts = append(parts, fmt.Sprintf("planned %d tasks (%s)", len(planned), idList(planned, 6)))
	}
	for _, c := range e.Changes {
		part := fmt.Sprintf("%s %s→%s", c.TaskID, c.From, c.To)
		old, _ := prev.Tasks.Get(c.TaskID)
		if t, _ := cur.Tasks.Get(c.TaskID); t.Attempts > old.Attempts {
			if a, ok := nodes.LastAttempt(cur, c.TaskID); ok {
				part += fmt.Sprintf(" (attempt %d failed)", a.Attempt)
			}
		}
		parts = append(parts, part)
	}
	if n, m := prev.Integrated.Len(), cur.Integrated.Len(); m > n {
		parts = append(parts, "integrated "+strings.Join(cur.Integrated.Items()[n:], ", "))
	}
	if escs := cur.Escalations.Get(); len(escs) > 0 && !slices.Equal(escs, prev.Escalations.Get()) {
		var ids []string
		for _, es := range escs {
			ids = append(ids, es.TaskID+" ("+es.Reason+")")
		}
		parts = append(parts, "escalated "+strings.Join(ids, ", "))
	}
	if out := cur.Outcome.Get(); out != "" && out != prev.Outcome.Get() {
		parts = append(parts, "run "+out)
	}
	if len(parts) == 0 {
		switch {
		case len(e.Log) > 0:
			// Parallel workers each add a line in one step: name them all.
			for _, l := range e.Log {
				parts = append(parts, firstLineOf(l))
			}
		case info.Source == "input":
			parts = append(parts, "run started")
		case info.Source == "update":
			parts = append(parts, "state updated")
		case !slices.Equal(cur.Batch.Get(), prev.Batch.Get()) && len(cur.Batch.Get()) > 0:
			parts = append(parts, "selected "+strings.Join(cur.Batch.Get(), ", "))
		default:
			parts = append(parts, "no task changed")
		}
	}
	e.Summary = strings.Join(parts, "; ")
	if d := nodes.RunUsage(cur).Sub(nodes.RunUsage(prev)); d.Tokens() > 0 {
		e.Usage = &d
	}
	return e
}

// idList joins ids, keeping the first keep of them.
func idList(ids []string, keep int) string {
	if len(ids) <= keep {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:keep], ", ") + fmt.Sprintf(", … %d more", len(ids)-keep)
}

// export writes the conversations of one attempt of a task: into Export
// when there is one, else one folder per Ralph iteration ("iteration-N").
// agent.Export puts subtasks in subfolders.
func (o *historyOpts) export(ctx context.Context, s *session, g *graph.Runnable[nodes.State], run nodes.Run, w io.Writer) error {
	ids, err := s.store.Conversations(ctx, run.ID, o.Task)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		head, _, err := headState(ctx, g, run.ID)
		if err != nil {
			return err
		}
		if _, ok := head.State.Tasks.Get(o.Task); !ok {
			return fmt.Errorf("run %s has no task %s; its tasks are %s", run.ID, o.Task, orDash(idList(head.State.Tasks.Keys(), 20)))
		}
		return fmt.Errorf("task %s of run %s has no agent conversations: it has not started, or its worker (a command worker) keeps none", o.Task, run.ID)
	}
	type conv struct {
		id        string
		attempt   int
		iteration int
	}
	var convs []conv
	attempts := map[int]bool{}
	last := 0
	for _, id := range ids {
		_, a, it, err := nodes.ParseConversationID(run.ID, id)
		if err != nil {
			return err
		}
		convs = append(convs, conv{id, a, it})
		attempts[a] = true
		last = max(last, a)
	}
	attempt := o.Attempt
	if attempt == 0 {
		attempt = last
	}
	if !attempts[attempt] {
		var have []string
		for a := 1; a <= last; a++ {
			if attempts[a] {
				have = append(have, strconv.Itoa(a))
			}
		}
		return fmt.Errorf("task %s of run %s has no conversation for attempt %d; it has attempt(s) %s", o.Task, run.ID, attempt, strings.Join(have, ", "))
	}
	var sel []conv
	for _, c := range convs {
		if c.attempt == attempt {
			sel = append(sel, c)
		}
	}
	hist := s.store.Histories(run.ID)
	var dirs []string
	for _, c := range sel {
		dir := o.Export
		if len(sel) > 1 {
			dir = filepath.Join(o.Export, fmt.Sprintf("iteration-%d", c.iteration))
		}
		if err := agent.Export(ctx, hist, c.id, dir); err != nil {
			return fmt.Errorf("export %s attempt %d of run %s: %w", o.Task, attempt, run.ID, err)
		}
		dirs = append(dirs, dir)
	}
	if len(dirs) == 1 {
		fmt.Fprintf(w, "wrote the conversation of %s attempt %d to %s\n", o.Task, attempt, dirs[0])
		return nil
	}
	fmt.Fprintf(w, "wrote %d conversations (Ralph iterations) of %s attempt %d:\n", len(dirs), o.Task, attempt)
	for _, d := range dirs {
		fmt.Fprintf(w, "  %s\n", d)
	}
	return nil
}
