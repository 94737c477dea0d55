package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tmc/langchaingo/llms"
)

// Tool names.
const (
	ToolReadFile            = "read_file"
	ToolListFiles           = "list_files"
	ToolSearchFiles         = "search_files"
	ToolWriteToFile         = "write_to_file"
	ToolApplyDiff           = "apply_diff"
	ToolExecuteCommand      = "execute_command"
	ToolUpdateTodoList      = "update_todo_list"
	ToolNewTask             = "new_task"
	ToolAttemptCompletion   = "attempt_completion"
	ToolAskFollowupQuestion = "ask_followup_question"
)

type paramKind int

const (
	kindString paramKind = iota
	kindInt
	kindBool
	kindTodos
	kindObject
)

type param struct {
	name     string
	kind     paramKind
	required bool
	desc     string
}

type toolSpec struct {
	name   string
	desc   string
	params []param
	// edit tools are subject to the mode's FileRegex.
	edit bool
	// pathParam names the parameter holding a worktree path, if any.
	pathParam string
}

// toolSpecs is every tool, in the order the system prompt lists them.
var toolSpecs = []toolSpec{
	{
		name: ToolReadFile, pathParam: "path",
		desc: "Read a file and return its lines prefixed with line numbers (\"12 | text\"). Use start_line and end_line (1-based, inclusive) to read part of a large file.",
		params: []param{
			{"path", kindString, true, "File path relative to the worktree."},
			{"start_line", kindInt, false, "First line to read, 1-based."},
			{"end_line", kindInt, false, "Last line to read, inclusive."},
		},
	},
	{
		name: ToolListFiles, pathParam: "path",
		desc: "List the files and folders in a folder, as paths relative to the worktree (folders end with /, symlinks with @). Set recursive to list the whole subtree. The .git folder is not listed.",
		params: []param{
			{"path", kindString, true, "Folder path relative to the worktree; \".\" is the worktree itself."},
			{"recursive", kindBool, false, "List recursively."},
		},
	},
	{
		name: ToolSearchFiles, pathParam: "path",
		desc: "Search the files under a folder for a regular expression (RE2 syntax) and return each matching line as path:line: text.",
		params: []param{
			{"path", kindString, true, "Folder path relative to the worktree."},
			{"regex", kindString, true, "RE2 regular expression."},
			{"file_pattern", kindString, false, "Glob on file names, for example *.go."},
		},
	},
	{
		name: ToolWriteToFile, pathParam: "path", edit: true,
		desc: "Write a whole file, creating it and its folders if needed. The content replaces the file completely; give every line.",
		params: []param{
			{"path", kindString, true, "File path relative to the worktree."},
			{"content", kindString, true, "The complete new content of the file."},
		},
	},
	{
		name: ToolApplyDiff, pathParam: "path", edit: true,
		desc: "Edit a file with one or more SEARCH/REPLACE blocks. Each block is:\n<<<<<<< SEARCH\n:start_line:N (optional)\n-------\n[exact existing lines]\n=======\n[replacement lines]\n>>>>>>> REPLACE\nThe SEARCH text must match the file exactly (including indentation) and only once, unless start_line picks the occurrence. Either every block applies or the file is left unchanged.",
		params: []param{
			{"path", kindString, true, "File path relative to the worktree."},
			{"diff", kindString, true, "One or more SEARCH/REPLACE blocks."},
		},
	},
	{
		name: ToolExecuteCommand,
		desc: "Run a shell command in the worktree and return its exit code and output (long output keeps its head and tail). Commands must pass the command policy.",
		params: []param{
			{"command", kindString, true, "The shell command."},
			{"timeout_seconds", kindInt, false, "Timeout in seconds."},
		},
	},
	{
		name: ToolUpdateTodoList,
		desc: "Replace the todo list. Every item has an id, its content and a status: pending, in_progress or completed. Keep it current: completion is refused while items are open.",
		params: []param{
			{"todos", kindTodos, true, "The complete list."},
		},
	},
	{
		name: ToolNewTask,
		desc: "Start a subtask in a mode with its own conversation. You wait until it ends; its attempt_completion result is returned as this tool's result. Give the subtask all the context it needs: it sees only the message.",
		params: []param{
			{"mode", kindString, true, "The subtask's mode slug."},
			{"message", kindString, true, "The subtask's instructions."},
		},
	},
	{
		name: ToolUseMCPTool,
		desc: "Call a tool of a connected MCP server (see MCP SERVERS). The arguments are checked against the tool's input schema before the call.",
		params: []param{
			{"server_name", kindString, true, "The server's name."},
			{"tool_name", kindString, true, "The tool's name on that server."},
			{"arguments", kindObject, false, "The tool's arguments, an object matching its input schema."},
		},
	},
	{
		name: ToolAccessMCPResource,
		desc: "Read a resource of a connected MCP server by its URI (see MCP SERVERS).",
		params: []param{
			{"server_name", kindString, true, "The server's name."},
			{"uri", kindString, true, "The resource's URI."},
		},
	},
	{
		name: ToolAttemptCompletion,
		desc: "Report that the task is complete, with a summary of what was done. It is refused while a tool failed in the same turn or todos are open.",
		params: []param{
			{"result", kindString, true, "What was done, for the reviewer."},
		},
	},
	{
		name: ToolAskFollowupQuestion,
		desc: "Ask a person a question. This run is unattended: asking stops the work and escalates the task to a human with your question. Ask only when you cannot proceed.",
		params: []param{
			{"question", kindString, true, "The question."},
		},
	},
}

func specByName(name string) (toolSpec, bool) {
	for _, s := range toolSpecs {
		if s.name == name {
			return s, true
		}
	}
	return toolSpec{}, false
}

// llmTools returns the native tool definitions of the tools in allowed.
func llmTools(allowed map[string]bool) []llms.Tool {
	var out []llms.Tool
	for _, s := range toolSpecs {
		if !allowed[s.name] {
			continue
		}
		out = append(out, llms.Tool{Type: "function", Function: &llms.FunctionDefinition{
			Name:        s.name,
			Description: s.desc,
			Parameters:  s.schema(),
		}})
	}
	return out
}

func (s toolSpec) schema() map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, p := range s.params {
		var sch map[string]any
		switch p.kind {
		case kindString:
			sch = map[string]any{"type": "string"}
		case kindInt:
			sch = map[string]any{"type": "integer"}
		case kindBool:
			sch = map[string]any{"type": "boolean"}
		case kindObject:
			sch = map[string]any{"type": "object"}
		case kindTodos:
			sch = map[string]any{
				"type": "array",
				"items": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"id":      map[string]any{"type": "string"},
						"content": map[string]any{"type": "string"},
						"status":  map[string]any{"type": "string", "enum": []string{TodoPending, TodoInProgress, TodoCompleted}},
					},
					"required": []string{"id", "content", "status"},
				},
			}
		}
		sch["description"] = p.desc
		props[p.name] = sch
		if p.required {
			required = append(required, p.name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required}
}

// args are a tool call's validated arguments.
type args struct {
	str   map[string]string
	num   map[string]int
	flag  map[string]bool
	obj   map[string]map[string]any
	todos []Todo
}

func (a args) s(name string) string { return a.str[name] }

// parseArguments decodes a tool call's argument string. It must be exactly
// one JSON object.
func parseArguments(raw string) (map[string]any, error) {
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.InputOffset() != int64(len(trimmed)) {
		return nil, fmt.Errorf("unexpected data after the JSON value at offset %d", dec.InputOffset())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, got %s", jsonKind(v))
	}
	return m, nil
}

// checkParams verifies required parameters and types, and converts them.
func checkParams(s toolSpec, m map[string]any) (args, error) {
	a := args{str: map[string]string{}, num: map[string]int{}, flag: map[string]bool{}, obj: map[string]map[string]any{}}
	known := map[string]bool{}
	for _, p := range s.params {
		known[p.name] = true
		v, present := m[p.name]
		if !present || v == nil {
			if p.required {
				return a, fmt.Errorf("missing required parameter %q", p.name)
			}
			continue
		}
		switch p.kind {
		case kindString:
			str, ok := v.(string)
			if !ok {
				return a, fmt.Errorf("parameter %q must be a string, got %s", p.name, jsonKind(v))
			}
			if p.required && strings.TrimSpace(str) == "" && p.name != "content" {
				return a, fmt.Errorf("parameter %q must not be empty", p.name)
			}
			a.str[p.name] = str
		case kindInt:
			n, err := toInt(v)
			if err != nil {
				return a, fmt.Errorf("parameter %q must be an integer, got %s", p.name, jsonKind(v))
			}
			a.num[p.name] = n
		case kindBool:
			switch b := v.(type) {
			case bool:
				a.flag[p.name] = b
			case string:
				pb, err := strconv.ParseBool(b)
				if err != nil {
					return a, fmt.Errorf("parameter %q must be a boolean, got string %q", p.name, b)
				}
				a.flag[p.name] = pb
			default:
				return a, fmt.Errorf("parameter %q must be a boolean, got %s", p.name, jsonKind(v))
			}
		case kindObject:
			obj, err := toObject(v)
			if err != nil {
				return a, fmt.Errorf("parameter %q %v, got %s", p.name, err, jsonKind(v))
			}
			a.obj[p.name] = obj
		case kindTodos:
			todos, err := toTodos(v)
			if err != nil {
				return a, fmt.Errorf("parameter %q: %w", p.name, err)
			}
			a.todos = todos
		}
	}
	for k := range m {
		if !known[k] {
			return a, fmt.Errorf("unknown parameter %q (parameters: %s)", k, paramNames(s))
		}
	}
	return a, nil
}

func paramNames(s toolSpec) string {
	var names []string
	for _, p := range s.params {
		n := p.name
		if !p.required {
			n += "?"
		}
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}

func toInt(v any) (int, error) {
	switch n := v.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return int(i), nil
		}
		f, err := n.Float64()
		if err != nil || f != math.Trunc(f) {
			return 0, fmt.Errorf("not an integer")
		}
		return int(f), nil
	case float64:
		if n != math.Trunc(n) {
			return 0, fmt.Errorf("not an integer")
		}
		return int(n), nil
	case string:
		return strconv.Atoi(strings.TrimSpace(n))
	}
	return 0, fmt.Errorf("not an integer")
}

// toObject takes a JSON object, or a string holding one (as models that
// learnt Roo-Code's XML tools send it).
func toObject(v any) (map[string]any, error) {
	switch o := v.(type) {
	case map[string]any:
		return o, nil
	case string:
		if strings.TrimSpace(o) == "" {
			return map[string]any{}, nil
		}
		if m, err := parseArguments(o); err == nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("must be a JSON object")
}

func toTodos(v any) ([]Todo, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("must be an array of {id, content, status}, got %s", jsonKind(v))
	}
	todos := make([]Todo, 0, len(list))
	seen := map[string]bool{}
	for i, item := range list {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("item %d must be an object, got %s", i, jsonKind(item))
		}
		var t Todo
		for _, f := range []struct {
			key string
			dst *string
		}{{"id", &t.ID}, {"content", &t.Content}, {"status", &t.Status}} {
			switch x := obj[f.key].(type) {
			case string:
				*f.dst = x
			case json.Number:
				*f.dst = x.String()
			case nil:
				return nil, fmt.Errorf("item %d: missing %q", i, f.key)
			default:
				return nil, fmt.Errorf("item %d: %q must be a string, got %s", i, f.key, jsonKind(x))
			}
		}
		if t.ID == "" {
			return nil, fmt.Errorf("item %d: id must not be empty", i)
		}
		if seen[t.ID] {
			return nil, fmt.Errorf("item %d: duplicate id %q", i, t.ID)
		}
		seen[t.ID] = true
		switch t.Status {
		case TodoPending, TodoInProgress, TodoCompleted:
		default:
			return nil, fmt.Errorf("item %d: status must be pending, in_progress or completed, got %q", i, t.Status)
		}
		todos = append(todos, t)
	}
	return todos, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// canonicalArgs is the repetition detector's key for a call's arguments:
// the object re-encoded with sorted keys, or the raw string when it is not
// valid JSON.
func canonicalArgs(raw string) string {
	m, err := parseArguments(raw)
	if err != nil {
		return "raw:" + raw
	}
	data, err := json.Marshal(m)
	if err != nil {
		return "raw:" + raw
	}
	return string(data)
}

// inputJSON returns the arguments as stored in a tool_use block: a compact
// JSON object, or nil and the raw string when they are not one.
func inputJSON(raw string) (json.RawMessage, string) {
	if _, err := parseArguments(raw); err != nil {
		return nil, raw
	}
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return json.RawMessage(`{}`), ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(trimmed)); err != nil {
		return nil, raw
	}
	return json.RawMessage(buf.Bytes()), ""
}

// Todo statuses.
const (
	TodoPending    = "pending"
	TodoInProgress = "in_progress"
	TodoCompleted  = "completed"
)

// Todo is one item of a conversation's todo list.
type Todo struct {
	ID      string `json:"id"`
	Content string `json:"content"`
	Status  string `json:"status"`
}

func openTodos(todos []Todo) []Todo {
	var open []Todo
	for _, t := range todos {
		if t.Status != TodoCompleted {
			open = append(open, t)
		}
	}
	return open
}

func formatTodos(todos []Todo) string {
	if len(todos) == 0 {
		return "(empty)"
	}
	var b strings.Builder
	for _, t := range todos {
		mark := " "
		switch t.Status {
		case TodoCompleted:
			mark = "x"
		case TodoInProgress:
			mark = "-"
		}
		fmt.Fprintf(&b, "[%s] %s: %s\n", mark, t.ID, t.Content)
	}
	return strings.TrimRight(b.String(), "\n")
}
