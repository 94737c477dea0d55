package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/taskloom/taskloom/llm"
)

// CondenseRequest is the first user message of a condensation call. Scripts
// for the scripted model match it (with a conversation listed before the
// task's) to supply the summary.
const CondenseRequest = "Summarize the conversation so far so that the work can continue from your summary."

const condenseSystem = `You write the summary that replaces the older part of a coding agent's conversation. The agent keeps the task and its most recent turns verbatim; everything else it will know only from your summary. Do not lose information: keep
1. every file read, created or changed, with what changed and why;
2. every command run and whether it passed, with the errors that matter;
3. decisions made and their reasons; approaches tried that failed;
4. the todo list and what remains to do;
5. exact names, signatures, values and error messages the next steps need.
Write plain text. Do not call tools.`

// maybeCondense condenses older turns when the next request's estimated
// tokens exceed the threshold. It returns an error only when ctx ended; a
// failed condensation is recorded and the conversation goes on.
func (c *conv) maybeCondense(ctx context.Context) error {
	limit := int(float64(c.a.opts.ContextWindow) * c.a.opts.CondenseThreshold)
	est := llm.EstimatePromptTokens(c.request()) + llm.EstimateToolTokens(c.tools)
	if est <= limit {
		return nil
	}
	return c.condense(ctx, est, limit)
}

func (c *conv) condense(ctx context.Context, est, limit int) error {
	api := c.rec.API
	// Visible messages, by index; index 0 is the task and always stays.
	var vis []int
	for i, m := range api {
		if m.CondenseParent == "" {
			vis = append(vis, i)
		}
	}
	// The kept part starts at an assistant message, so every tool_use and
	// its tool_result (in the next user message) stay on the same side.
	var boundary int
	var region []int
	for keep := c.a.opts.KeepRecentTurns; keep >= 1 && region == nil; keep-- {
		seen := 0
		boundary = -1
		for j := len(vis) - 1; j > 0; j-- {
			if api[vis[j]].Role == RoleAssistant {
				seen++
				if seen == keep {
					boundary = vis[j]
					break
				}
			}
		}
		if boundary < 0 {
			continue
		}
		var r []int
		nonSummary := 0
		for _, i := range vis {
			if i > 0 && i < boundary {
				r = append(r, i)
				if !api[i].IsSummary {
					nonSummary++
				}
			}
		}
		if nonSummary > 0 {
			region = r
		}
	}
	if region == nil {
		c.a.log.WarnContext(ctx, "context over the threshold but nothing to condense", c.logAttrs(slog.Int("tokens", est), slog.Int("limit", limit))...)
		return nil
	}

	var transcript strings.Builder
	for _, i := range region {
		writeTranscript(&transcript, api[i])
	}
	system := condenseSystem + "\n\n## The task\n" + textOf(api[0]) + "\n\n## The conversation to summarize\n" + transcript.String()
	req := []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, system),
		llms.TextParts(llms.ChatMessageTypeHuman, CondenseRequest),
	}
	resp, err := c.a.model.GenerateContent(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.say(SayError, "Condensation failed, continuing with the full history: "+err.Error())
		c.a.log.WarnContext(ctx, "condensation failed", c.logAttrs(slog.String("error", err.Error()))...)
		return nil
	}
	summary, stop := "", ""
	if len(resp.Choices) > 0 && resp.Choices[0] != nil {
		summary, stop = strings.TrimSpace(resp.Choices[0].Content), resp.Choices[0].StopReason
	}
	u := usageFromResponse(resp, llm.EstimatePromptTokens(req), llm.EstimateTokens(summary), c.a.opts.Pricing)
	c.rec.Meta.Usage.Add(u)
	c.budget.used.Add(u)
	if llm.IsMaxTokens(stop) {
		// A summary cut short would silently drop what came last.
		c.say(SayError, "Condensation was cut off at the output token limit, continuing with the full history.")
		return nil
	}
	if summary == "" {
		c.say(SayError, "Condensation returned an empty summary, continuing with the full history.")
		return nil
	}

	c.rec.Meta.Condensations++
	n := c.rec.Meta.Condensations
	id := fmt.Sprintf("condense-%d", n)
	count := 0
	for _, i := range region {
		api[i].CondenseParent = id
		if !api[i].IsSummary {
			count++
		}
	}
	text := fmt.Sprintf("Conversation summary (condensation %d; %d earlier messages were condensed):\n%s\n\nFacts recorded by taskloom:\n- Files changed so far: %s\n- Todo list:\n%s",
		n, count, summary, listOrNone(c.rec.Meta.FilesChanged), indent(formatTodos(c.rec.Meta.Todos)))
	msg := APIMessage{Role: RoleUser, TS: c.now(), IsSummary: true, CondenseID: id, Content: []Block{{Type: BlockText, Text: text}}}
	c.rec.API = append(api[:boundary], append([]APIMessage{msg}, api[boundary:]...)...)

	after := llm.EstimatePromptTokens(c.request()) + llm.EstimateToolTokens(c.tools)
	ui := c.say(SayCondense, text)
	ui.Tokens = &u
	c.a.log.InfoContext(ctx, "condensed context", c.logAttrs(slog.Int("condensation", n), slog.Int("messages", count),
		slog.Int("tokens_before", est), slog.Int("tokens_after", after))...)
	return c.save(ctx)
}

func writeTranscript(b *strings.Builder, m APIMessage) {
	if m.IsSummary {
		fmt.Fprintf(b, "\n[earlier summary]\n%s\n", textOf(m))
		return
	}
	for _, blk := range m.Content {
		switch blk.Type {
		case BlockText:
			fmt.Fprintf(b, "\n[%s]\n%s\n", m.Role, blk.Text)
		case BlockToolUse:
			args := string(blk.Input)
			if blk.Input == nil {
				args = blk.RawInput
			}
			fmt.Fprintf(b, "\n[assistant called %s]\n%s\n", blk.Name, args)
		case BlockToolResult:
			status := "result"
			if blk.IsError {
				status = "error"
			}
			fmt.Fprintf(b, "\n[tool %s]\n%s\n", status, blk.Content)
		}
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
