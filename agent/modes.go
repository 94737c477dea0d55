package agent

import (
	"fmt"
	"regexp"
	"sort"
)

// Tool groups (design 003): a mode enables groups, not single tools.
const (
	GroupRead    = "read"
	GroupEdit    = "edit"
	GroupCommand = "command"
	GroupModes   = "modes"
	GroupMCP     = "mcp"
)

// groupTools lists the tools of each group. The modes group, and the
// always-available tools, are enabled in every mode.
var groupTools = map[string][]string{
	GroupRead:    {ToolReadFile, ToolListFiles, ToolSearchFiles},
	GroupEdit:    {ToolWriteToFile, ToolApplyDiff},
	GroupCommand: {ToolExecuteCommand},
	GroupModes:   {ToolNewTask},
	GroupMCP:     {ToolUseMCPTool, ToolAccessMCPResource},
}

// alwaysAvailable are enabled in every mode, whatever its groups.
var alwaysAvailable = []string{ToolNewTask, ToolUpdateTodoList, ToolAttemptCompletion, ToolAskFollowupQuestion}

// Mode is a role with the tool groups it may use.
type Mode struct {
	Slug string `json:"slug"`
	Name string `json:"name"`
	// Role opens the system prompt.
	Role string `json:"role"`
	// Groups are the enabled tool groups: read, edit, command, mcp (modes
	// is always enabled).
	Groups []string `json:"groups"`
	// FileRegex, when set, restricts the edit tools to paths it matches
	// (RE2, against the slash-separated path relative to the worktree).
	FileRegex string `json:"file_regex,omitempty"`
	// FileRegexDescription explains FileRegex to the model.
	FileRegexDescription string `json:"file_regex_description,omitempty"`
	// CustomInstructions are appended to the rules.
	CustomInstructions string `json:"custom_instructions,omitempty"`
}

// Built-in mode slugs.
const (
	ModeCode         = "code"
	ModeArchitect    = "architect"
	ModeAsk          = "ask"
	ModeDebug        = "debug"
	ModeOrchestrator = "orchestrator"
)

// BuiltinModes returns the five built-in modes (design 003).
func BuiltinModes() []Mode {
	return []Mode{
		{
			Slug: ModeCode, Name: "Code",
			Role:   "You are a highly skilled software engineer with extensive knowledge of many programming languages, frameworks, design patterns and best practices. You implement the task completely, with tests, and verify your work before you report it done.",
			Groups: []string{GroupRead, GroupEdit, GroupCommand, GroupMCP},
		},
		{
			Slug: ModeArchitect, Name: "Architect",
			Role:                 "You are an experienced technical leader who plans before building. You gather information, ask what is unclear, and write the plan down as Markdown.",
			Groups:               []string{GroupRead, GroupEdit, GroupMCP},
			FileRegex:            `\.md$`,
			FileRegexDescription: "Markdown files only",
		},
		{
			Slug: ModeAsk, Name: "Ask",
			Role:   "You are a knowledgeable technical assistant. You answer questions about the code base by reading it; you do not change it.",
			Groups: []string{GroupRead, GroupMCP},
		},
		{
			Slug: ModeDebug, Name: "Debug",
			Role:   "You are an expert software debugger. You reproduce the problem, form hypotheses, add diagnostics, find the root cause and fix it.",
			Groups: []string{GroupRead, GroupEdit, GroupCommand, GroupMCP},
		},
		{
			Slug: ModeOrchestrator, Name: "Orchestrator",
			Role:   "You are a strategic workflow orchestrator. You break complex work into subtasks, delegate each to the most suitable mode with new_task, track them with a todo list, and synthesize their results. You do not read or change files yourself.",
			Groups: nil,
		},
	}
}

var slugRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// resolveModes merges custom modes over the built-ins (a custom mode with a
// built-in's slug replaces it) and validates them.
func resolveModes(custom []Mode) (map[string]Mode, error) {
	modes := make(map[string]Mode)
	for _, m := range BuiltinModes() {
		modes[m.Slug] = m
	}
	for i, m := range custom {
		if !slugRE.MatchString(m.Slug) {
			return nil, fmt.Errorf("custom_modes[%d].slug: must be kebab-case, got %q", i, m.Slug)
		}
		if m.Role == "" {
			return nil, fmt.Errorf("custom_modes[%d].role: must not be empty", i)
		}
		for _, g := range m.Groups {
			if _, ok := groupTools[g]; !ok {
				return nil, fmt.Errorf("custom_modes[%d].groups: unknown group %q (want read, edit, command, modes or mcp)", i, g)
			}
		}
		if m.FileRegex != "" {
			if _, err := regexp.Compile(m.FileRegex); err != nil {
				return nil, fmt.Errorf("custom_modes[%d].file_regex: %w", i, err)
			}
		}
		if m.Name == "" {
			m.Name = m.Slug
		}
		modes[m.Slug] = m
	}
	return modes, nil
}

// modeTools returns the names of the tools a mode may use, sorted in the
// order of allTools.
func modeTools(m Mode) map[string]bool {
	allowed := make(map[string]bool)
	for _, t := range alwaysAvailable {
		allowed[t] = true
	}
	for _, g := range m.Groups {
		for _, t := range groupTools[g] {
			allowed[t] = true
		}
	}
	return allowed
}

func modeSlugs(modes map[string]Mode) []string {
	out := make([]string, 0, len(modes))
	for s := range modes {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
