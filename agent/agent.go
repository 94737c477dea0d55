package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/taskloom/taskloom/llm"
	"github.com/tmc/langchaingo/llms"
)

// Reason says why a conversation's loop ended.
type Reason string

// Reasons a loop ends.
const (
	// ReasonCompleted: attempt_completion was accepted.
	ReasonCompleted Reason = "completed"
	// ReasonQuestion: ask_followup_question in an unattended run; the
	// pipeline escalates the question to a person.
	ReasonQuestion Reason = "question"
	// ReasonMistakeLimit: too many consecutive rejected or failed calls.
	ReasonMistakeLimit Reason = "mistake_limit"
	// ReasonRepetition: the same call with the same arguments too many
	// times in a row.
	ReasonRepetition Reason = "repetition"
	// ReasonMaxTurns: the turn limit was reached.
	ReasonMaxTurns Reason = "max_turns"
	// ReasonBudget: the token or cost budget was spent.
	ReasonBudget Reason = "budget"
	// ReasonCancelled: the context ended.
	ReasonCancelled Reason = "cancelled"
	// ReasonError: the model or the store failed.
	ReasonError Reason = "error"
	// ReasonProvider: the model provider kept failing (rate limits,
	// overload, outages) after the retries llm.max_retries allows, or
	// refused the request. The conversation can be resumed where it
	// stopped.
	ReasonProvider Reason = "provider"
)

// ErrProviderRefused is the error of a conversation stopped because the
// provider refused the API key: no task can go on until a person fixes
// it, and then the conversation resumes where it stopped.
var ErrProviderRefused = errors.New("the model provider refused the API key: check the key in its environment variable, and that it may use the model")

// ErrExists is returned by Run for a conversation ID the store already
// holds; use Resume to continue it.
var ErrExists = errors.New("conversation already exists")

// DefaultContextWindow is the context window, in tokens, the agent
// assumes when Opts.ContextWindow is 0: that of the Claude models, and the
// default of the config's agent.context_window.
const DefaultContextWindow = 200_000

// Opts configures an Agent. A nil *Opts, and every zero field, means the
// default given on the field.
type Opts struct {
	// Mode is the default mode slug; default "code".
	Mode string
	// CustomModes are added to the built-in modes; one with a built-in's
	// slug replaces it.
	CustomModes []Mode
	// MaxTurns bounds the model calls of one conversation; default 50.
	MaxTurns int
	// MaxConsecutiveMistakes ends the loop after this many rejected or
	// failed calls in a row (a reply without a tool call counts); default 3.
	MaxConsecutiveMistakes int
	// RepetitionLimit ends the loop when the same tool is called with the
	// same arguments this many times in a row; default 3.
	RepetitionLimit int
	// MaxTokens and MaxCostUSD bound a conversation tree's usage (a task
	// attempt with its subtasks); zero means no bound.
	MaxTokens  int
	MaxCostUSD float64
	// Pricing prices the tokens. When it is zero, Model's list price
	// (llm.PriceOf) is used; unknown models count tokens only.
	Pricing Pricing
	// Model is the model spec or name, for pricing (for example
	// "anthropic:claude-sonnet-4-5").
	Model string
	// CommandPolicy filters execute_command.
	CommandPolicy CommandPolicy
	// CommandTimeout is execute_command's default timeout (default 2m);
	// MaxCommandTimeout caps timeout_seconds (default 10m).
	CommandTimeout    time.Duration
	MaxCommandTimeout time.Duration
	// OutputLimit caps a tool result in bytes, keeping the head and tail of
	// command output; default 16 KiB.
	OutputLimit int
	// ReadLimit caps the lines read_file returns per call; default 1000.
	ReadLimit int
	// AllowOpenTodos lets attempt_completion succeed while todos are open.
	AllowOpenTodos bool
	// Skills says where skills are found; nil means the defaults.
	Skills *SkillsOpts
	// ContextWindow is the model's window in tokens; default
	// DefaultContextWindow.
	ContextWindow int
	// CondenseThreshold is the fraction of the window above which older
	// turns are condensed; default 0.8.
	CondenseThreshold float64
	// KeepRecentTurns are kept verbatim by a condensation; default 2.
	KeepRecentTurns int
	// MaxSubtaskDepth bounds new_task nesting; default 3.
	MaxSubtaskDepth int
	// Rules are added to the system prompt's rules.
	Rules []string
	// ConfineFunc confines execute_command in a worktree: its environment,
	// sandbox and redaction. nil reduces the environment to the default
	// sandbox.env_allow, without a sandbox.
	ConfineFunc ConfineFunc
	// MCP gives the modes with the mcp group the tools and resources of
	// the configured MCP servers; nil offers none.
	MCP MCP
	// Logger receives the agent's logs; nil discards them.
	Logger *slog.Logger
	// NowFunc reads the clock; nil means time.Now.
	NowFunc func() time.Time
}

func (o *Opts) withDefaults() Opts {
	var r Opts
	if o != nil {
		r = *o
	}
	if r.Mode == "" {
		r.Mode = ModeCode
	}
	if r.MaxTurns <= 0 {
		r.MaxTurns = 50
	}
	if r.MaxConsecutiveMistakes <= 0 {
		r.MaxConsecutiveMistakes = 3
	}
	if r.RepetitionLimit <= 0 {
		r.RepetitionLimit = 3
	}
	if r.CommandTimeout <= 0 {
		r.CommandTimeout = 2 * time.Minute
	}
	if r.MaxCommandTimeout <= 0 {
		r.MaxCommandTimeout = 10 * time.Minute
	}
	if r.OutputLimit <= 0 {
		r.OutputLimit = 16 << 10
	}
	if r.ReadLimit <= 0 {
		r.ReadLimit = 1000
	}
	if r.ContextWindow <= 0 {
		r.ContextWindow = DefaultContextWindow
	}
	if r.CondenseThreshold <= 0 || r.CondenseThreshold > 1 {
		r.CondenseThreshold = 0.8
	}
	if r.KeepRecentTurns <= 0 {
		r.KeepRecentTurns = 2
	}
	if r.MaxSubtaskDepth <= 0 {
		r.MaxSubtaskDepth = 3
	}
	if r.Pricing == (Pricing{}) && r.Model != "" {
		if p, ok := llm.PriceOf(r.Model); ok {
			r.Pricing = p
		}
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.NowFunc == nil {
		r.NowFunc = time.Now
	}
	return r
}

// Agent runs coding conversations with a model, in a worktree, persisting
// them to a store. One Agent may run any number of conversations
// concurrently; it keeps no per-conversation state.
type Agent struct {
	model llms.Model
	store HistoryStore
	opts  Opts
	modes map[string]Mode
	log   *slog.Logger
}

// New returns an Agent. It fails on invalid custom modes or an unknown
// default mode.
func New(model llms.Model, store HistoryStore, opts *Opts) (*Agent, error) {
	if model == nil {
		return nil, errors.New("new agent: nil model")
	}
	if store == nil {
		return nil, errors.New("new agent: nil history store")
	}
	o := opts.withDefaults()
	modes, err := resolveModes(o.CustomModes)
	if err != nil {
		return nil, fmt.Errorf("new agent: %w", err)
	}
	if _, ok := modes[o.Mode]; !ok {
		return nil, fmt.Errorf("new agent: mode: unknown mode %q (modes: %v)", o.Mode, modeSlugs(modes))
	}
	return &Agent{model: model, store: store, opts: o, modes: modes, log: o.Logger}, nil
}

// Store returns the agent's history store.
func (a *Agent) Store() HistoryStore { return a.store }

// Modes returns the slugs of the modes the agent knows, sorted.
func (a *Agent) Modes() []string { return modeSlugs(a.modes) }

// Request starts a conversation.
type Request struct {
	// ID names the conversation in the store; required.
	ID string
	// Task is the first user message.
	Task string
	// Worktree is the directory the conversation may read and change.
	Worktree string
	// Mode is the mode slug; "" means the agent's default.
	Mode string
}

// ResumeOpts adjusts a resumed conversation. A nil *ResumeOpts resumes it
// as it was.
type ResumeOpts struct {
	// Worktree replaces the recorded worktree (for example, when the
	// attempt's worktree was recreated).
	Worktree string
	// Answer answers a pending ask_followup_question, in this conversation
	// or in the subtask it waits for.
	Answer string
	// Note is added to the conversation as a user message before it
	// continues (a reviewer's note).
	Note string
}

// Result is how a conversation ended.
type Result struct {
	ConversationID string `json:"conversation_id"`
	Reason         Reason `json:"reason"`
	// Completion is the accepted attempt_completion result.
	Completion string `json:"completion,omitempty"`
	// Question is the pending ask_followup_question.
	Question string `json:"question,omitempty"`
	// Detail explains a reason other than completed.
	Detail string `json:"detail,omitempty"`
	Mode   string `json:"mode"`
	Turns  int    `json:"turns"`
	// Usage is the whole conversation tree's: this conversation and its
	// subtasks, over every run and resume.
	Usage Usage `json:"usage"`
	// ByConversation is each conversation's own usage, over the tree.
	ByConversation map[string]Usage `json:"by_conversation"`
	Todos          []Todo           `json:"todos,omitempty"`
	// FilesChanged are the files write_to_file and apply_diff changed in
	// the tree, relative to the worktree, sorted. Files changed by commands
	// are not tracked.
	FilesChanged []string `json:"files_changed,omitempty"`
	ChildIDs     []string `json:"child_ids,omitempty"`
}

// Run starts conversation req.ID and runs it until it ends. The Result is
// non-nil whenever the conversation was created. The error is non-nil when
// it ended with ReasonCancelled (wrapping the context's error) or
// ReasonError, or could not start.
func (a *Agent) Run(ctx context.Context, req Request) (*Result, error) {
	return a.run(ctx, req, false)
}

// run starts a conversation; with replace, a stored one of the same ID is
// overwritten.
func (a *Agent) run(ctx context.Context, req Request, replace bool) (*Result, error) {
	if req.ID == "" {
		return nil, errors.New("run agent: empty conversation id")
	}
	if _, err := a.store.Load(ctx, req.ID); err == nil {
		if !replace {
			return nil, fmt.Errorf("run agent %s: %w", req.ID, ErrExists)
		}
		a.log.WarnContext(ctx, "starting a stored conversation over", slog.String("conversation_id", req.ID))
	} else if !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("run agent %s: %w", req.ID, err)
	}
	mode := req.Mode
	if mode == "" {
		mode = a.opts.Mode
	}
	if _, ok := a.modes[mode]; !ok {
		return nil, fmt.Errorf("run agent %s: unknown mode %q", req.ID, mode)
	}
	rec := a.newRecord(req.ID, req.Task, mode, req.Worktree, nil)
	c, err := a.newConv(ctx, rec, &budget{})
	if err != nil {
		return nil, fmt.Errorf("run agent %s: %w", req.ID, err)
	}
	if err := c.save(ctx); err != nil {
		return nil, fmt.Errorf("run agent %s: %w", req.ID, err)
	}
	return c.loop(ctx)
}

// Resume continues a stored conversation. A completed one returns its
// result without calling the model. A parent waiting for a subtask resumes
// the subtask first and then continues with its result. Every tool_use
// without a tool_result is first given an "interrupted" one.
func (a *Agent) Resume(ctx context.Context, id string, opts *ResumeOpts) (*Result, error) {
	if opts == nil {
		opts = &ResumeOpts{}
	}
	rec, err := a.store.Load(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("resume agent: %w", err)
	}
	used, err := a.treeUsage(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("resume agent %s: %w", id, err)
	}
	return a.resume(ctx, rec, opts, &budget{used: used})
}

// Load returns a stored conversation's result as it stands, without
// running anything.
func (a *Agent) Load(ctx context.Context, id string) (*Result, error) {
	rec, err := a.store.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	return a.resultOf(ctx, rec)
}

func (a *Agent) newRecord(id, task, mode, worktree string, parent *Metadata) *Record {
	now := a.opts.NowFunc().UnixMilli()
	rec := &Record{Meta: Metadata{
		ID: id, RootID: id, Mode: mode, Status: StatusActive, Worktree: worktree,
		CreatedAt: now, UpdatedAt: now,
	}}
	if parent != nil {
		rec.Meta.ParentID = parent.ID
		rec.Meta.RootID = parent.RootID
		rec.Meta.Depth = parent.Depth + 1
	}
	rec.UI = append(rec.UI, UIMessage{TS: now, Type: UISay, Say: SayTask, Text: task})
	rec.API = append(rec.API, APIMessage{Role: RoleUser, TS: now, Content: []Block{{Type: BlockText, Text: task}}})
	return rec
}

// budget is the usage of a conversation tree, shared by a parent and its
// subtasks while they run.
type budget struct {
	used Usage
}

func (a *Agent) overBudget(b *budget) (bool, string) {
	if a.opts.MaxTokens > 0 && b.used.Tokens() >= a.opts.MaxTokens {
		return true, fmt.Sprintf("token budget spent: %d of %d tokens", b.used.Tokens(), a.opts.MaxTokens)
	}
	if a.opts.MaxCostUSD > 0 && b.used.CostUSD >= a.opts.MaxCostUSD {
		return true, fmt.Sprintf("cost budget spent: $%.4f of $%.4f", b.used.CostUSD, a.opts.MaxCostUSD)
	}
	return false, ""
}

// treeUsage sums the own usage of a conversation and its descendants.
func (a *Agent) treeUsage(ctx context.Context, id string) (Usage, error) {
	var total Usage
	err := a.walk(ctx, id, func(m *Metadata) { total.Add(m.Usage) })
	return total, err
}

// walk calls f on the metadata of id and of its descendants, parents first.
func (a *Agent) walk(ctx context.Context, id string, f func(*Metadata)) error {
	return a.walkDepth(ctx, id, f, 0)
}

func (a *Agent) walkDepth(ctx context.Context, id string, f func(*Metadata), depth int) error {
	if depth > 32 {
		return fmt.Errorf("conversation %s: subtasks nested too deeply", id)
	}
	rec, err := a.store.Load(ctx, id)
	if err != nil {
		if depth > 0 && errors.Is(err, ErrNotFound) {
			return nil // a child registered but never saved
		}
		return err
	}
	f(&rec.Meta)
	for _, c := range rec.Meta.ChildIDs {
		if err := a.walkDepth(ctx, c, f, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// resultOf builds a conversation's Result from the store.
func (a *Agent) resultOf(ctx context.Context, rec *Record) (*Result, error) {
	m := rec.Meta
	res := &Result{
		ConversationID: m.ID, Reason: m.Reason, Completion: m.Completion, Detail: m.Error,
		Mode: m.Mode, Turns: m.Turns, Todos: m.Todos, ChildIDs: m.ChildIDs,
		ByConversation: map[string]Usage{},
	}
	if m.PendingQuestion != nil {
		res.Question = m.PendingQuestion.Question
	}
	files := map[string]bool{}
	res.ByConversation[m.ID] = m.Usage
	res.Usage = m.Usage
	for _, f := range m.FilesChanged {
		files[f] = true
	}
	for _, c := range m.ChildIDs {
		err := a.walk(ctx, c, func(cm *Metadata) {
			res.ByConversation[cm.ID] = cm.Usage
			res.Usage.Add(cm.Usage)
			for _, f := range cm.FilesChanged {
				files[f] = true
			}
			if res.Question == "" && cm.PendingQuestion != nil && m.PendingChild != nil {
				res.Question = cm.PendingQuestion.Question
			}
		})
		if err != nil {
			return res, err
		}
	}
	res.FilesChanged = sortedKeys(files)
	return res, nil
}
