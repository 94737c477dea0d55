package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/review"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/scheduler"
)

// StatusEscalated is the status the page shows for a task that waits for a
// review decision; the task itself is failed (or pending, for a deadlock).
const StatusEscalated = "escalated"

// snapshot is what the page shows of a run at one moment. The SSE stream
// sends it whenever it changes, with the events that led there.
type snapshot struct {
	RunID        string               `json:"run_id"`
	Status       string               `json:"status"`
	TargetBranch string               `json:"target_branch"`
	Product      string               `json:"product"`
	Repo         string               `json:"repo"`
	Model        string               `json:"model"`
	Step         int64                `json:"step"`
	Tasks        []taskView           `json:"tasks"`
	Milestones   []planner.Milestone  `json:"milestones"`
	Summary      scheduler.Summary    `json:"summary"`
	Workers      []nodes.WorkerStatus `json:"workers"`
	Escalations  []escalationView     `json:"escalations"`
	Usage        nodes.UsageReport    `json:"usage"`
	// Resume is the command that continues the run, and ResumeNow says
	// whether the run waits for it: every escalation has a decision, or
	// it was interrupted.
	Resume    string `json:"resume"`
	ResumeNow bool   `json:"resume_now"`
	// Reason says why a run that ended failed or aborted did.
	Reason string `json:"reason,omitempty"`
	// Decisions are the review decisions recorded and not acted on yet:
	// resume acts on them.
	Decisions []decided `json:"decisions"`

	state  nodes.State
	result graph.Result[nodes.State]
	// recorded is the status the run's process recorded. Status is what
	// the leases show now: it also moves when a review takes the thread's
	// lease for a moment, which ends nothing.
	recorded string
}

// taskView is a task as the graph and the lists show it.
type taskView struct {
	ID           string            `json:"id"`
	Title        string            `json:"title"`
	Status       string            `json:"status"`
	Milestone    string            `json:"milestone"`
	Dependencies []string          `json:"dependencies"`
	Attempt      int               `json:"attempt"`
	MaxAttempts  int               `json:"max_attempts"`
	Critical     bool              `json:"critical"`
	Label        string            `json:"label"`
	Usage        nodes.UsageReport `json:"usage"`
}

// decided is a review decision that resume has not acted on yet.
type decided struct {
	TaskID string `json:"task_id"`
	Action string `json:"action"`
	Note   string `json:"note,omitempty"`
}

// escalationView is an escalation that waits for a decision.
type escalationView struct {
	nodes.EscalationPayload
	InterruptID string `json:"interrupt_id"`
}

// runMeta is the part of a run's stored meta the page shows.
type runMeta struct {
	Model   string `json:"model"`
	Workers int    `json:"workers"`
}

// load reads a run's newest state and builds its snapshot.
func (s *Server) load(ctx context.Context, runID string) (*snapshot, error) {
	run, err := s.store.Run(ctx, runID)
	if errors.Is(err, nodes.ErrRunNotFound) {
		return nil, fmt.Errorf("run %s: %w", runID, errNotFound)
	}
	if err != nil {
		return nil, err
	}
	recorded := run.Status
	if run.Status, err = s.liveStatus(ctx, run); err != nil {
		return nil, err
	}
	res, err := s.graph.State(ctx, runID, -1)
	if errors.Is(err, checkpoint.ErrNotFound) {
		// The run stopped, or is, before its first step.
		res, err = graph.Result[nodes.State]{Step: -1}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the state of run %s: %w", runID, err)
	}
	var meta runMeta
	_ = json.Unmarshal(run.Meta, &meta) // a run without meta shows no model
	st := res.State
	unended, err := s.store.UnendedUsage(ctx, runID, st)
	if err != nil {
		return nil, err
	}
	snap := &snapshot{
		RunID: run.ID, Status: run.Status, TargetBranch: st.Branch.Get(), Product: run.ProductPath, Repo: run.Repo,
		Model: meta.Model, Step: res.Step, Milestones: milestones(st),
		Summary: scheduler.Summarize(st.Tasks.Values()), Workers: nodes.Workers(res),
		Escalations: []escalationView{}, Usage: nodes.NewUsageReport(nodes.RunUsage(st).Add(unended), meta.Model),
		Resume: s.resumeCommand(run.ID), state: st, result: res, recorded: recorded,
	}
	if s.workers != nil {
		if err := s.workers(ctx, runID, snap.Workers); err != nil {
			s.log.WarnContext(ctx, "cannot read the workers' leases", slog.Any("error", err))
		}
	}
	if recorded == nodes.RunFailed || recorded == nodes.RunAborted {
		snap.Reason = st.OutcomeReason.Get()
	}
	decisions, _ := nodes.RecordedDecisions(res) // one that cannot be read is not shown
	snap.Decisions = []decided{}
	for _, id := range slices.Sorted(maps.Keys(decisions)) {
		snap.Decisions = append(snap.Decisions, decided{TaskID: id, Action: decisions[id].Action, Note: decisions[id].Note})
	}
	escalated := map[string]bool{}
	for _, in := range res.Interrupts {
		if in.Node != nodes.NodeEscalation {
			continue
		}
		e := escalationView{InterruptID: in.ID}
		if err := in.Decode(&e.EscalationPayload); err != nil {
			return nil, fmt.Errorf("run %s: escalation %s: %w", runID, in.ID, err)
		}
		escalated[e.TaskID] = true
		snap.Escalations = append(snap.Escalations, e)
	}
	// Answered escalations leave the run paused until resume acts on them.
	snap.ResumeNow = run.Status == nodes.RunInterrupted ||
		(run.Status == nodes.RunPaused && len(snap.Escalations) == 0)

	usage := map[string]llm.Usage{}
	for _, a := range st.Attempts.Values() {
		usage[a.TaskID] = usage[a.TaskID].Add(a.Usage())
	}
	lay := s.layout(runID, st.Tasks.Values(), st.Milestones.Get(), meta.Workers)
	for _, t := range st.Tasks.Values() {
		// A task that is not running shows the attempt it last had, not
		// the one it would get next.
		attempt := nodes.CurrentAttempt(st, t.ID)
		if a, ok := nodes.LastAttempt(st, t.ID); ok && t.Status != planner.StatusInProgress {
			attempt = a.Attempt
		}
		v := taskView{ID: t.ID, Title: t.Title, Status: string(t.Status), Milestone: t.MilestoneID,
			Dependencies: nonNil(t.Dependencies), Attempt: attempt, MaxAttempts: t.MaxAttempts,
			Critical: lay.critical[t.ID], Usage: nodes.NewUsageReport(usage[t.ID], meta.Model)}
		if escalated[t.ID] {
			v.Status = StatusEscalated
		}
		v.Label = taskLabel(v)
		snap.Tasks = append(snap.Tasks, v)
	}
	if snap.Tasks == nil {
		snap.Tasks = []taskView{}
	}
	return snap, nil
}

// taskLabel is a task's accessible name: its ID, title and status, and
// whether it is on the critical path.
func taskLabel(v taskView) string {
	label := fmt.Sprintf("%s: %s, status %s", v.ID, v.Title, strings.ReplaceAll(v.Status, "_", " "))
	if v.Critical {
		label += ", on the critical path"
	}
	return label
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// resumeCommand is the command that continues run id from a shell.
func (s *Server) resumeCommand(id string) string {
	return strings.Join(append([]string{"taskloom", "resume", id}, s.resumeFlags...), " ")
}

// taskDetail is everything the page shows about one task.
type taskDetail struct {
	Task       planner.Task      `json:"task"`
	Status     string            `json:"status"`
	Critical   bool              `json:"critical"`
	Usage      nodes.UsageReport `json:"usage"`
	Escalation *escalationView   `json:"escalation"`
	Attempts   []attemptView     `json:"attempts"`
	RunStatus  string            `json:"run_status"`
	Resume     string            `json:"resume"`
}

// attemptView is one attempt of a task.
type attemptView struct {
	Attempt      int                `json:"attempt"`
	Error        string             `json:"error"`
	Diff         string             `json:"diff"`
	Changed      bool               `json:"changed"`
	Tests        string             `json:"tests"`
	TestOutput   string             `json:"test_output"`
	Passed       bool               `json:"passed"`
	Integrated   string             `json:"integrated"`
	Conflicts    []string           `json:"conflicts"`
	Question     string             `json:"question"`
	Usage        nodes.UsageReport  `json:"usage"`
	Conversation []conversationView `json:"conversation"`
	// InProgress: the attempt has not ended (it runs, or its process was
	// killed), so only its conversation so far, and the usage of it, are
	// known.
	InProgress bool `json:"in_progress,omitempty"`
}

// conversationView is one conversation of an attempt, as its UI history
// records it.
type conversationView struct {
	ID       string    `json:"id"`
	Messages []message `json:"messages"`
}

// message is one entry of a conversation.
type message struct {
	Type   string `json:"type"`
	Kind   string `json:"kind"`
	Text   string `json:"text"`
	Tool   string `json:"tool,omitempty"`
	Args   string `json:"args,omitempty"`
	Result string `json:"result,omitempty"`
	Error  bool   `json:"error,omitempty"`
}

// detail builds the detail of task taskID of a snapshot.
func (s *Server) detail(ctx context.Context, snap *snapshot, taskID string) (*taskDetail, error) {
	st := snap.state
	t, ok := st.Tasks.Get(taskID)
	if !ok {
		return nil, fmt.Errorf("run %s has no task %s: %w", snap.RunID, taskID, errNotFound)
	}
	d := &taskDetail{Task: t, Status: string(t.Status), Attempts: []attemptView{}, RunStatus: snap.Status, Resume: snap.Resume}
	for _, v := range snap.Tasks {
		if v.ID == taskID {
			d.Status, d.Critical, d.Usage = v.Status, v.Critical, v.Usage
		}
	}
	for i := range snap.Escalations {
		if snap.Escalations[i].TaskID == taskID {
			d.Escalation = &snap.Escalations[i]
		}
	}
	convs, used, err := s.conversations(ctx, snap.RunID, taskID)
	if err != nil {
		return nil, err
	}
	ended := map[int]bool{}
	for _, a := range st.Attempts.Values() {
		if a.TaskID != taskID {
			continue
		}
		ended[a.Attempt] = true
		av := attemptView{Attempt: a.Attempt, Error: a.Error, Diff: a.Diff, Changed: a.Changed, Integrated: a.Integrated,
			Conflicts: nonNil(a.Conflicts), Question: a.Question, Usage: nodes.NewUsageReport(a.Usage(), snap.Model),
			Conversation: nonNil(convs[a.Attempt])}
		if a.ProviderError != "" && av.Error == "" {
			av.Error = a.ProviderError
		}
		if a.Tests != nil {
			av.Passed, av.TestOutput, av.Tests = a.Tests.Passed, a.Tests.Output, review.TestSummary(*a.Tests)
		}
		d.Attempts = append(d.Attempts, av)
	}
	// An attempt that has not ended has no record yet, but its
	// conversation is in the store as it goes: a worker can talk for half
	// an hour, and the page is live.
	for _, n := range slices.Sorted(maps.Keys(convs)) {
		if !ended[n] {
			d.Attempts = append(d.Attempts, attemptView{Attempt: n, InProgress: true, Conflicts: []string{},
				Usage: nodes.NewUsageReport(used[n], snap.Model), Conversation: convs[n]})
		}
	}
	return d, nil
}

// Limits of a conversation's texts on the page.
const (
	convText   = 4000
	convResult = 2000
)

// conversations reads the task's conversations from the run's histories,
// by attempt.
func (s *Server) conversations(ctx context.Context, runID, taskID string) (map[int][]conversationView, map[int]llm.Usage, error) {
	ids, err := s.store.Conversations(ctx, runID, taskID)
	if err != nil {
		return nil, nil, err
	}
	out, used := map[int][]conversationView{}, map[int]llm.Usage{}
	h := s.store.Histories(runID)
	for _, id := range ids {
		_, attempt, _, err := nodes.ParseConversationID(runID, id)
		if err != nil {
			return nil, nil, err
		}
		rec, err := h.Load(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		// The roots are listed: their finished subtasks are counted in.
		used[attempt] = used[attempt].Add(rec.Meta.TreeUsage().LLM())
		cv := conversationView{ID: id, Messages: []message{}}
		for _, m := range rec.UI {
			msg := message{Type: m.Type, Kind: m.Say + m.Ask, Text: cut(m.Text, convText)}
			if m.Tool != nil {
				msg.Tool, msg.Args, msg.Result, msg.Error = m.Tool.Name, cut(m.Tool.Arguments, convText), cut(m.Tool.Result, convResult), m.Tool.IsError
			}
			cv.Messages = append(cv.Messages, msg)
		}
		out[attempt] = append(out[attempt], cv)
	}
	return out, used, nil
}

// cut shortens s to about n bytes, saying so.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("\n… %d more bytes", len(s)-n)
}

// milestones are the run's milestones, each with the status its tasks
// give it now (as status shows it): the plan stored them as they were
// planned.
func milestones(st nodes.State) []planner.Milestone {
	ms := slices.Clone(nonNil(st.Milestones.Get()))
	tasks := st.Tasks.Values()
	for i := range ms {
		ms[i].Status = planner.MilestoneStatus(ms[i].ID, tasks)
	}
	return ms
}
