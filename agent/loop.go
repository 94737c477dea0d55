package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/llm"
)

// conv is one conversation while it runs.
type conv struct {
	a       *Agent
	rec     *Record
	mode    Mode
	allowed map[string]bool
	tools   []llms.Tool
	fileRE  *regexp.Regexp
	root    string // the worktree, absolute and symlink-free
	skills  []Skill
	system  string
	budget  *budget
	mcp     []MCPServer

	mistakes int
	lastKey  string
	repeats  int

	// creds hides credentials in what the tools read; set once, from the
	// worktree's confinement.
	creds *proc.Redactor
}

func (a *Agent) newConv(ctx context.Context, rec *Record, b *budget) (*conv, error) {
	mode, ok := a.modes[rec.Meta.Mode]
	if !ok {
		return nil, fmt.Errorf("conversation %s: unknown mode %q", rec.Meta.ID, rec.Meta.Mode)
	}
	root, err := realDir(rec.Meta.Worktree)
	if err != nil {
		return nil, fmt.Errorf("conversation %s: worktree: %w", rec.Meta.ID, err)
	}
	c := &conv{a: a, rec: rec, mode: mode, root: root, budget: b, allowed: modeTools(mode)}
	if mode.FileRegex != "" {
		c.fileRE = regexp.MustCompile(mode.FileRegex) // validated by resolveModes
	}
	if rec.Meta.Depth >= a.opts.MaxSubtaskDepth {
		delete(c.allowed, ToolNewTask)
	}
	if c.allowed[ToolUseMCPTool] && a.opts.MCP != nil {
		c.mcp = a.opts.MCP.Servers(ctx)
	}
	if len(c.mcp) == 0 {
		delete(c.allowed, ToolUseMCPTool)
		delete(c.allowed, ToolAccessMCPResource)
	}
	c.tools = llmTools(c.allowed)
	c.skills = DiscoverSkills(ctx, a.opts.Skills, root, mode.Slug, a.log)
	c.system = c.systemPrompt()
	return c, nil
}

func (c *conv) now() int64 { return c.a.opts.NowFunc().UnixMilli() }

func (c *conv) logAttrs(extra ...any) []any {
	return append([]any{slog.String("conversation_id", c.rec.Meta.ID), slog.String("mode", c.mode.Slug)}, extra...)
}

func (c *conv) say(kind, text string) *UIMessage {
	c.rec.UI = append(c.rec.UI, UIMessage{TS: c.now(), Type: UISay, Say: kind, Text: text})
	return &c.rec.UI[len(c.rec.UI)-1]
}

func (c *conv) save(ctx context.Context) error {
	c.rec.Meta.UpdatedAt = c.now()
	if err := c.a.store.Save(ctx, c.rec); err != nil {
		return fmt.Errorf("persist conversation %s: %w", c.rec.Meta.ID, err)
	}
	return nil
}

// loop runs turns until the conversation ends.
func (c *conv) loop(ctx context.Context) (*Result, error) {
	for {
		if err := ctx.Err(); err != nil {
			return c.stop(ctx, ReasonCancelled, "the context ended: "+err.Error(), err)
		}
		if c.mistakes >= c.a.opts.MaxConsecutiveMistakes {
			return c.stop(ctx, ReasonMistakeLimit,
				fmt.Sprintf("%d consecutive mistakes (rejected or failed tool calls)", c.mistakes), nil)
		}
		if c.rec.Meta.Turns >= c.a.opts.MaxTurns {
			return c.stop(ctx, ReasonMaxTurns, fmt.Sprintf("reached the limit of %d turns", c.a.opts.MaxTurns), nil)
		}
		if over, why := c.a.overBudget(c.budget); over {
			return c.stop(ctx, ReasonBudget, why, nil)
		}
		if err := c.maybeCondense(ctx); err != nil {
			if ctx.Err() != nil {
				return c.stop(ctx, ReasonCancelled, "the context ended: "+ctx.Err().Error(), ctx.Err())
			}
			return c.stop(ctx, ReasonError, err.Error(), err)
		}
		end, err := c.turn(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return c.stop(ctx, ReasonCancelled, "the context ended: "+ctx.Err().Error(), ctx.Err())
			}
			var perr *llm.ProviderError
			if errors.As(err, &perr) {
				// Not the conversation's doing: it stops where it is, to
				// be resumed once the provider is back, or once a person
				// has fixed the key or the model it refused.
				var refused error
				if perr.Refused() {
					refused = fmt.Errorf("%w: %v", ErrProviderRefused, err)
				}
				return c.stop(ctx, ReasonProvider, err.Error(), refused)
			}
			return c.stop(ctx, ReasonError, err.Error(), err)
		}
		if end != nil {
			return c.finish(ctx, end)
		}
	}
}

// ending is how a turn ended the loop.
type ending struct {
	reason     Reason
	detail     string
	completion string
	question   string
	err        error
}

// turn makes one model call and runs its tool calls. It returns a non-nil
// ending when the loop must stop, and an error when the model call or the
// store failed.
func (c *conv) turn(ctx context.Context) (*ending, error) {
	msgs := c.request()
	estIn := llm.EstimatePromptTokens(msgs) + llm.EstimateToolTokens(c.tools)
	// A model call can take minutes (a long reply, a stalled endpoint
	// until llm.request_timeout): the live view says so, rather than
	// show the last tool as if it still ran.
	report(ctx, Activity{Tool: "model", Summary: WaitingForModel})
	resp, err := c.a.model.GenerateContent(ctx, msgs, llms.WithTools(c.tools))
	if err != nil {
		return nil, fmt.Errorf("model call: %w", err)
	}
	if resp == nil || len(resp.Choices) == 0 || resp.Choices[0] == nil {
		return nil, errors.New("model call: the response has no choices")
	}
	choice := resp.Choices[0]
	calls := choice.ToolCalls
	if len(calls) == 0 && choice.FuncCall != nil {
		calls = []llms.ToolCall{{Type: "function", FunctionCall: choice.FuncCall}}
	}
	u := usageFromResponse(resp, estIn, llm.EstimateReplyTokens(choice), c.a.opts.Pricing)
	c.rec.Meta.Usage.Add(u)
	c.budget.used.Add(u)
	c.rec.Meta.Turns++
	report(ctx, Activity{Tool: "model", Summary: fmt.Sprintf("turn %d", c.rec.Meta.Turns), Usage: u})
	req := c.say(SayAPIRequest, fmt.Sprintf("turn %d: %d messages, ~%d tokens", c.rec.Meta.Turns, len(msgs), estIn))
	req.Tokens = &u

	if llm.IsMaxTokens(choice.StopReason) {
		return nil, c.truncated(ctx, choice, calls)
	}

	assistant := APIMessage{Role: RoleAssistant, TS: c.now()}
	if strings.TrimSpace(choice.Content) != "" {
		assistant.Content = append(assistant.Content, Block{Type: BlockText, Text: choice.Content})
		c.say(SayText, choice.Content)
	}
	used := c.usedToolIDs()
	for i := range calls {
		if calls[i].FunctionCall == nil {
			calls[i].FunctionCall = &llms.FunctionCall{}
		}
		if calls[i].ID == "" || used[calls[i].ID] {
			calls[i].ID = fmt.Sprintf("toolu_%d_%d", c.rec.Meta.Turns, i)
		}
		used[calls[i].ID] = true
		b := Block{Type: BlockToolUse, ID: calls[i].ID, Name: calls[i].FunctionCall.Name}
		b.Input, b.RawInput = inputJSON(calls[i].FunctionCall.Arguments)
		assistant.Content = append(assistant.Content, b)
	}
	if len(assistant.Content) == 0 {
		assistant.Content = []Block{{Type: BlockText, Text: "(empty response)"}}
	}
	c.rec.API = append(c.rec.API, assistant)

	if len(calls) == 0 {
		c.mistakes++
		msg := "[ERROR] You did not use a tool in your previous response. Use a tool to make progress; when the task is done, call attempt_completion."
		c.rec.API = append(c.rec.API, APIMessage{Role: RoleUser, TS: c.now(), Content: []Block{{Type: BlockText, Text: msg}}})
		c.say(SayError, "The model answered without calling a tool.")
		return nil, c.save(ctx)
	}

	c.rec.API = append(c.rec.API, APIMessage{Role: RoleUser, TS: c.now()})
	resultsAt := len(c.rec.API) - 1
	turnFailed := false
	var end *ending
	for _, call := range calls {
		if end != nil {
			c.addResult(resultsAt, Block{Type: BlockToolResult, ToolUseID: call.ID,
				Content: fmt.Sprintf("Not executed: the conversation ended (%s) before this call.", end.reason)})
			continue
		}
		out := c.redact(c.execCall(ctx, call, turnFailed, resultsAt))
		if out.failed || out.isError {
			turnFailed = true
		}
		switch {
		case out.mistake:
			c.mistakes++
		case !out.isError:
			c.mistakes = 0
		}
		if !out.noResult {
			c.addResult(resultsAt, Block{Type: BlockToolResult, ToolUseID: call.ID, Content: out.content, IsError: out.isError})
		}
		c.recordUI(call, out)
		if out.end != nil {
			end = out.end
		}
	}
	if err := c.save(ctx); err != nil {
		return nil, err
	}
	return end, nil
}

// truncated records a reply the output limit cut off. Its tool calls are
// incomplete, so none is parsed or run: the model is told so and asked to
// go on with less per call. It counts as a mistake, so a model that is
// cut off every time stops at the mistake limit.
func (c *conv) truncated(ctx context.Context, choice *llms.ContentChoice, calls []llms.ToolCall) error {
	text := choice.Content
	if strings.TrimSpace(text) == "" {
		text = "(reply cut off at the output limit)"
	}
	c.rec.API = append(c.rec.API, APIMessage{Role: RoleAssistant, TS: c.now(), Content: []Block{{Type: BlockText, Text: text}}})
	var names []string
	for _, tc := range calls {
		if tc.FunctionCall != nil && tc.FunctionCall.Name != "" {
			names = append(names, tc.FunctionCall.Name)
		}
	}
	msg := "[ERROR] Your previous response was cut off at the output token limit (max_tokens)"
	if len(names) > 0 {
		msg += " in the middle of a call to " + strings.Join(names, ", ") + "; the call was incomplete and was not run"
	}
	msg += ". Continue from where you were, doing less per call: write a large file in parts (write_to_file for the first part, then apply_diff to add the rest), or make several smaller edits."
	c.rec.API = append(c.rec.API, APIMessage{Role: RoleUser, TS: c.now(), Content: []Block{{Type: BlockText, Text: msg}}})
	c.say(SayError, "The reply was cut off at the output token limit; the model was asked to continue with smaller calls.")
	c.mistakes++
	return c.save(ctx)
}

func (c *conv) addResult(at int, b Block) {
	c.rec.API[at].Content = append(c.rec.API[at].Content, b)
}

func (c *conv) usedToolIDs() map[string]bool {
	used := map[string]bool{}
	for _, m := range c.rec.API {
		for _, b := range m.Content {
			if b.Type == BlockToolUse {
				used[b.ID] = true
			}
		}
	}
	return used
}

func (c *conv) recordUI(call llms.ToolCall, out callOutcome) {
	if out.uiSkip {
		return
	}
	kind := SayTool
	if out.rejected {
		kind = SayError
	}
	text := ""
	if out.rejected {
		text = fmt.Sprintf("Tool call %s rejected: %s", call.FunctionCall.Name, out.content)
	}
	c.rec.UI = append(c.rec.UI, UIMessage{TS: c.now(), Type: UISay, Say: kind, Text: text, Tool: &UITool{
		ID: call.ID, Name: call.FunctionCall.Name, Arguments: call.FunctionCall.Arguments,
		Path: out.path, Result: shorten(out.content, 2000), IsError: out.isError,
	}})
}

// finish records an ending and returns the result.
func (c *conv) finish(ctx context.Context, e *ending) (*Result, error) {
	m := &c.rec.Meta
	m.Reason = e.reason
	switch e.reason {
	case ReasonCompleted:
		m.Status = StatusCompleted
		m.Completion = e.completion
		m.Error = ""
		c.say(SayCompletionResult, e.completion)
	case ReasonQuestion:
		m.Status = StatusQuestion
		m.Error = ""
	default:
		m.Status = StatusStopped
		m.Error = e.detail
		c.say(SayError, fmt.Sprintf("Stopped (%s): %s", e.reason, e.detail))
	}
	c.a.log.InfoContext(ctx, "agent conversation ended", c.logAttrs(slog.String("reason", string(e.reason)),
		slog.Int("turns", m.Turns), slog.Int("tokens", m.Usage.Tokens()))...)
	saveCtx := context.WithoutCancel(ctx)
	if err := c.save(saveCtx); err != nil {
		res, _ := c.a.resultOf(saveCtx, c.rec)
		return res, err
	}
	res, err := c.a.resultOf(saveCtx, c.rec)
	if err != nil {
		return res, fmt.Errorf("conversation %s: %w", m.ID, err)
	}
	if e.question != "" {
		res.Question = e.question
	}
	if e.err != nil {
		return res, fmt.Errorf("conversation %s %s: %w", m.ID, e.reason, e.err)
	}
	return res, nil
}

func (c *conv) stop(ctx context.Context, r Reason, detail string, err error) (*Result, error) {
	return c.finish(ctx, &ending{reason: r, detail: detail, err: err})
}

// resume continues rec: its pending subtask first, then repair, then the
// loop.
func (a *Agent) resume(ctx context.Context, rec *Record, ro *ResumeOpts, b *budget) (*Result, error) {
	if rec.Meta.Status == StatusCompleted {
		return a.resultOf(ctx, rec)
	}
	if ro.Worktree != "" {
		rec.Meta.Worktree = ro.Worktree
	}
	c, err := a.newConv(ctx, rec, b)
	if err != nil {
		return nil, fmt.Errorf("resume agent: %w", err)
	}
	a.log.InfoContext(ctx, "resume agent conversation", c.logAttrs(slog.String("status", rec.Meta.Status))...)

	if pc := rec.Meta.PendingChild; pc != nil {
		out, childErr := c.resumeChild(ctx, pc, ro, b)
		if out.end != nil {
			if err := c.save(ctx); err != nil {
				return nil, err
			}
			e := out.end
			if childErr != nil && e.err == nil {
				e.err = childErr
			}
			return c.finish(ctx, e)
		}
		c.placeResult(pc.ToolUseID, Block{Type: BlockToolResult, ToolUseID: pc.ToolUseID, Content: out.content, IsError: out.isError})
	}
	if pq := rec.Meta.PendingQuestion; pq != nil {
		content := "No answer was given: the run was resumed without one. Proceed with your best judgment, or ask again."
		if ro.Answer != "" {
			content = "Answer: " + ro.Answer
			c.say(SayUserFeedback, ro.Answer)
		}
		c.placeResult(pq.ToolUseID, Block{Type: BlockToolResult, ToolUseID: pq.ToolUseID, Content: content})
		rec.Meta.PendingQuestion = nil
	}
	if n := repairHistory(&rec.API); n > 0 {
		c.say(SayError, fmt.Sprintf("Resumed: %d interrupted tool call(s) were given an \"interrupted\" result.", n))
		a.log.WarnContext(ctx, "repaired interrupted tool calls", c.logAttrs(slog.Int("count", n))...)
	}
	last := &rec.API[len(rec.API)-1]
	if last.Role == RoleAssistant {
		rec.API = append(rec.API, APIMessage{Role: RoleUser, TS: c.now()})
		last = &rec.API[len(rec.API)-1]
		if ro.Note == "" {
			last.Content = append(last.Content, Block{Type: BlockText, Text: "[Resumed] Continue the task."})
		}
	}
	if ro.Note != "" {
		last.Content = append(last.Content, Block{Type: BlockText, Text: "Note from the reviewer: " + ro.Note})
		c.say(SayUserFeedback, ro.Note)
	}
	rec.Meta.Status, rec.Meta.Reason, rec.Meta.Error = StatusActive, "", ""
	if err := c.save(ctx); err != nil {
		return nil, err
	}
	return c.loop(ctx)
}

// placeResult puts a tool_result right after the assistant message that
// holds the tool_use.
func (c *conv) placeResult(toolUseID string, b Block) {
	insertToolResult(&c.rec.API, toolUseID, b, c.now())
}

func insertToolResult(api *[]APIMessage, toolUseID string, b Block, ts int64) {
	msgs := *api
	for i, m := range msgs {
		if m.Role != RoleAssistant {
			continue
		}
		for _, blk := range m.Content {
			if blk.Type == BlockToolUse && blk.ID == toolUseID {
				if i+1 < len(msgs) && msgs[i+1].Role == RoleUser && !msgs[i+1].IsSummary {
					msgs[i+1].Content = append(msgs[i+1].Content, b)
					sortResults(&msgs[i+1], m)
					return
				}
				next := APIMessage{Role: RoleUser, TS: ts, Content: []Block{b}, CondenseParent: m.CondenseParent}
				msgs = append(msgs[:i+1], append([]APIMessage{next}, msgs[i+1:]...)...)
				*api = msgs
				return
			}
		}
	}
}

// sortResults orders a user message's tool_results as their tool_uses are
// ordered in the assistant message, with any text after them.
func sortResults(user *APIMessage, assistant APIMessage) {
	order := map[string]int{}
	for i, b := range assistant.Content {
		if b.Type == BlockToolUse {
			order[b.ID] = i
		}
	}
	sort.SliceStable(user.Content, func(i, j int) bool {
		return rank(user.Content[i], order) < rank(user.Content[j], order)
	})
}

func rank(b Block, order map[string]int) int {
	if b.Type == BlockToolResult {
		if r, ok := order[b.ToolUseID]; ok {
			return r
		}
		return 1 << 20
	}
	return 1 << 21
}

// repairHistory gives every tool_use that has no tool_result anywhere an
// "interrupted" tool_result, so that providers accept the history. It
// returns how many it repaired.
func repairHistory(api *[]APIMessage) int {
	results := map[string]bool{}
	for _, m := range *api {
		for _, b := range m.Content {
			if b.Type == BlockToolResult {
				results[b.ToolUseID] = true
			}
		}
	}
	var missing []string
	for _, m := range *api {
		if m.Role != RoleAssistant {
			continue
		}
		for _, b := range m.Content {
			if b.Type == BlockToolUse && !results[b.ID] {
				missing = append(missing, b.ID)
			}
		}
	}
	for _, id := range missing {
		insertToolResult(api, id, Block{Type: BlockToolResult, ToolUseID: id, IsError: true,
			Content: "interrupted: this tool call did not finish because the conversation was interrupted (crash or restart). Check the current state before repeating it."}, 0)
	}
	return len(missing)
}

// request builds the model's messages: the system prompt, then the visible
// history. The newest condensation summary follows the task text inside the
// first user message, so the task stays first and verbatim.
func (c *conv) request() []llms.MessageContent {
	out := []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeSystem, c.system)}
	var summary string
	for _, m := range c.rec.API {
		if m.CondenseParent == "" && m.IsSummary {
			summary = textOf(m)
		}
	}
	names := map[string]string{}
	first := true
	for _, m := range c.rec.API {
		if m.CondenseParent != "" || m.IsSummary {
			continue
		}
		switch m.Role {
		case RoleAssistant:
			var parts []llms.ContentPart
			for _, b := range m.Content {
				switch b.Type {
				case BlockText:
					parts = append(parts, llms.TextContent{Text: b.Text})
				case BlockToolUse:
					names[b.ID] = b.Name
					args := "{}"
					if b.Input != nil {
						var buf bytes.Buffer
						if json.Compact(&buf, b.Input) == nil {
							args = buf.String()
						}
					}
					parts = append(parts, llms.ToolCall{ID: b.ID, Type: "function",
						FunctionCall: &llms.FunctionCall{Name: b.Name, Arguments: args}})
				}
			}
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: parts})
		case RoleUser:
			var texts []llms.ContentPart
			for _, b := range m.Content {
				switch b.Type {
				case BlockToolResult:
					name, ok := names[b.ToolUseID]
					if !ok {
						continue // its tool_use is not visible
					}
					content := b.Content
					if b.IsError {
						if !strings.HasPrefix(content, "Error") && !strings.HasPrefix(content, "interrupted") {
							content = "Error: " + content
						}
						// Anthropic's tool_result says is_error.
						content = llm.MarkToolError(content)
					}
					out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{
						llms.ToolCallResponse{ToolCallID: b.ToolUseID, Name: name, Content: content},
					}})
				case BlockText:
					texts = append(texts, llms.TextContent{Text: b.Text})
				}
			}
			if first {
				first = false
				if summary != "" {
					texts = append(texts, llms.TextContent{Text: summary})
				}
			}
			if len(texts) > 0 {
				out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeHuman, Parts: texts})
			}
		}
	}
	return out
}

func textOf(m APIMessage) string {
	var parts []string
	for _, b := range m.Content {
		if b.Type == BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
