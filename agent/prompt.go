package agent

import (
	"fmt"
	"runtime"
	"strings"
)

// systemPrompt builds the system prompt: the mode's role, the tools, the
// rules, the skills and the task context.
func (c *conv) systemPrompt() string {
	var b strings.Builder
	m := c.mode
	fmt.Fprintf(&b, "%s\n\nYou are working in %s mode (%s).\n", m.Role, m.Name, m.Slug)

	b.WriteString("\n====\n\nTOOLS\n\n")
	b.WriteString("Call tools through native function calling, with arguments as one JSON object. You may call several tools in one turn; they run in order. The tools of this mode:\n")
	for _, s := range toolSpecs {
		if !c.allowed[s.name] {
			continue
		}
		fmt.Fprintf(&b, "\n## %s(%s)\n%s\n", s.name, paramNames(s), s.desc)
	}

	b.WriteString("\n====\n\nRULES\n\n")
	rules := []string{
		"All paths are relative to the worktree (the current directory of commands). Absolute paths, paths through .. and symlinks that lead outside the worktree are rejected, and so is editing .git.",
		"A rejected or malformed call does nothing and returns an error; read it and send a corrected call.",
		"Read a file before changing it. Prefer apply_diff for small changes to existing files and write_to_file for new files or complete rewrites.",
		"This run is unattended: nobody answers questions. ask_followup_question stops the work and escalates it to a person, so use it only when you cannot proceed.",
		fmt.Sprintf("Calling the same tool with the same arguments %d times in a row stops the conversation, and so do %d failed calls in a row.", c.a.opts.RepetitionLimit, c.a.opts.MaxConsecutiveMistakes),
		"When the task is done and verified, call attempt_completion with a summary of what you did. It is refused while a tool failed in the same turn.",
	}
	if !c.a.opts.AllowOpenTodos {
		rules = append(rules, "For work with several steps, keep a todo list with update_todo_list. attempt_completion is refused while todos are open.")
	}
	if m.FileRegex != "" {
		desc := m.FileRegexDescription
		if desc == "" {
			desc = "files matching " + m.FileRegex
		}
		rules = append(rules, fmt.Sprintf("In %s mode the edit tools may only change %s (paths matching %s).", m.Slug, desc, m.FileRegex))
	}
	if c.allowed[ToolExecuteCommand] {
		rules = append(rules, fmt.Sprintf("Commands run with sh -c in the worktree, with a default timeout of %s; long output keeps its head and tail.", c.a.opts.CommandTimeout))
		if p := c.a.opts.CommandPolicy; len(p.Allow) > 0 || len(p.Deny) > 0 {
			if len(p.Allow) > 0 {
				rules = append(rules, "Allowed command prefixes: "+strings.Join(p.Allow, ", ")+".")
			}
			if len(p.Deny) > 0 {
				rules = append(rules, "Denied command prefixes: "+strings.Join(p.Deny, ", ")+".")
			}
		}
	}
	if c.allowed[ToolNewTask] {
		rules = append(rules, "new_task starts a subtask with its own conversation in the mode you name ("+strings.Join(c.a.Modes(), ", ")+"); it sees only your message, so include the context it needs, and it must end with attempt_completion.")
	}
	rules = append(rules, c.a.opts.Rules...)
	if m.CustomInstructions != "" {
		rules = append(rules, m.CustomInstructions)
	}
	for _, r := range rules {
		fmt.Fprintf(&b, "- %s\n", r)
	}

	if len(c.mcp) > 0 {
		b.WriteString(mcpPrompt(c.mcp))
	}

	if len(c.skills) > 0 {
		b.WriteString("\n====\n\nSKILLS\n\n")
		b.WriteString("<mandatory_skill_check>\nBefore you act on the task, check whether one of these skills applies. If one does, load it first with read_file on its location and follow its instructions.\n</mandatory_skill_check>\n\nAvailable skills:\n")
		for _, s := range c.skills {
			fmt.Fprintf(&b, "- %s: %s\n  Location: %s\n", s.Name, s.Description, s.Location)
		}
	}

	b.WriteString("\n====\n\nTASK CONTEXT\n\n")
	fmt.Fprintf(&b, "- Conversation: %s\n", c.rec.Meta.ID)
	if c.rec.Meta.ParentID != "" {
		fmt.Fprintf(&b, "- This is a subtask of %s (depth %d). Its attempt_completion result is returned to the parent.\n", c.rec.Meta.ParentID, c.rec.Meta.Depth)
	}
	fmt.Fprintf(&b, "- Worktree: %s\n", c.root)
	fmt.Fprintf(&b, "- Operating system: %s/%s\n", runtime.GOOS, runtime.GOARCH)
	b.WriteString("- The task is the first user message.\n")
	return b.String()
}
