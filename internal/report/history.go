package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
)

// History is the newest of a run's checkpoints, oldest first.
type History struct {
	RunID string
	// Flags go with the taskloom command Write prints (" --db URL").
	Flags   string
	Entries []Entry
	// Total counts all the run's checkpoints.
	Total int
}

// NewHistory describes the newest limit checkpoints of run runID (all of
// them when limit is 0). Each described checkpoint costs a state read.
func NewHistory(ctx context.Context, g *graph.Runnable[nodes.State], runID string, limit int) (History, error) {
	infos, err := g.History(ctx, runID, 0)
	if err != nil {
		return History{}, fmt.Errorf("history of run %s: %w", runID, err)
	}
	h := History{RunID: runID, Total: len(infos)}
	if limit > 0 && len(infos) > limit {
		infos = infos[:limit]
	}
	slices.Reverse(infos) // oldest first
	h.Entries, err = summarize(ctx, g, runID, infos)
	return h, err
}

// Write prints the history as a table.
func (h History) Write(w io.Writer) error {
	switch {
	case h.Total == 0:
		_, err := fmt.Fprintf(w, "run %s has no checkpoints yet\n", h.RunID)
		return err
	case len(h.Entries) < h.Total:
		fmt.Fprintf(w, "run %s: the newest %d of %d checkpoints (--all shows all)\n", h.RunID, len(h.Entries), h.Total)
	default:
		fmt.Fprintf(w, "run %s: %d checkpoints\n", h.RunID, h.Total)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tNODE\tTIME\tSUMMARY")
	for _, e := range h.Entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", e.Step, nodesLabel(e.Nodes, e.Source), localTime(e.Time), e.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "fork from a checkpoint with taskloom resume %s%s --from STEP\n", h.RunID, h.Flags)
	return err
}

// Entry is a checkpoint of a run, described: a line of taskloom history.
type Entry struct {
	Step    int64        `json:"step"`
	Source  string       `json:"source"`
	Nodes   []string     `json:"nodes"`
	Time    time.Time    `json:"time"`
	Summary string       `json:"summary"`
	Changes []TaskChange `json:"changes"`
	// Log is the run log's lines this step added.
	Log []string `json:"log"`
	// Usage is what the step's model calls used, when they used any.
	Usage *llm.Usage `json:"usage,omitempty"`
}

// TaskChange is a task's status change in one step.
type TaskChange struct {
	TaskID string `json:"task_id"`
	From   string `json:"from"`
	To     string `json:"to"`
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

// summarize describes each checkpoint by comparing the state it
// holds with the state of the step before. infos are in step order.
func summarize(ctx context.Context, g *graph.Runnable[nodes.State], runID string, infos []graph.CheckpointInfo) ([]Entry, error) {
	entries := make([]Entry, 0, len(infos))
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
		var decode *checkpoint.DecodeError
		if errors.As(err, &decode) {
			// A damaged checkpoint is listed as such: history is where
			// the user picks the one to go on from. Damage to the pending
			// results of the step after the newest one is not this
			// checkpoint's: it is the one to go on from.
			summary := "cannot be decoded: " + clip.Line(decode.Err.Error(), 120)
			if decode.Step > info.Step {
				summary = fmt.Sprintf("the pending results of step %d cannot be decoded (%s); this checkpoint is whole: go on from it with resume --from %d",
					decode.Step, clip.Line(decode.Err.Error(), 80), info.Step)
			}
			entries = append(entries, Entry{Step: info.Step, Source: info.Source, Nodes: nonNilStrings(info.Writers), Time: info.CreatedAt,
				Summary: summary, Changes: []TaskChange{}, Log: []string{}})
			havePrev = false
			continue
		}
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

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// summarizeStep describes one checkpoint: its task status changes, the
// plan, escalations and outcome it recorded, or else the first log line
// it added. Without the previous state (pruned), only the log is used.
func summarizeStep(info graph.CheckpointInfo, prev, cur nodes.State, havePrev bool) Entry {
	e := Entry{Step: info.Step, Source: info.Source, Nodes: info.Writers, Time: info.CreatedAt,
		Changes: []TaskChange{}, Log: []string{}}
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
	for _, l := range e.Log {
		if strings.HasPrefix(l, "replan: ") {
			// A replan's checkpoint says so first: resume --from finds it.
			parts = append(parts, l)
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
			e.Changes = append(e.Changes, TaskChange{TaskID: t.ID, From: string(old.Status), To: string(t.Status)})
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
		// A run done with its tasks, some of them skipped, ended partial.
		parts = append(parts, "run "+nodes.EndStatus(cur))
	}
	if len(parts) == 0 {
		switch {
		case len(e.Log) > 0:
			// Parallel workers each add a line in one step: name them all.
			for _, l := range e.Log {
				parts = append(parts, clip.Line(l, 0))
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
