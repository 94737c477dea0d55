package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/taskloom/taskloom/internal/proc"
)

// FileName is the config file taskloom reads from the root of the repo.
const FileName = ".project-config.json"

// Worker kinds.
const (
	// WorkerAgent is the built-in tool-using coding agent.
	WorkerAgent = "agent"
	// WorkerCommand is an external agent CLI run from an argv template.
	WorkerCommand = "command"
)

// BuiltinModes are the agent modes that exist without any custom_modes entry.
var BuiltinModes = []string{"code", "architect", "ask", "debug", "orchestrator"}

// ToolGroups are the tool groups a custom mode may list (tools:
// read = read_file, list_files, search_files; edit = write_to_file,
// apply_diff; command = execute_command; modes = new_task; mcp =
// use_mcp_tool, access_mcp_resource). The tools
// update_todo_list, attempt_completion and ask_followup_question are always
// available.
var ToolGroups = []string{"read", "edit", "command", "modes", "mcp"}

// Config is the content of .project-config.json: the documented keys plus the taskloom
// extensions worktree, agent and planner (see the package doc).
type Config struct {
	TaskSizeLimits    TaskSizeLimits    `json:"task_size_limits" mapstructure:"task_size_limits"`
	ParallelWorkers   int               `json:"parallel_workers" mapstructure:"parallel_workers"`
	MaxAttempts       int               `json:"max_attempts" mapstructure:"max_attempts"`
	Model             string            `json:"model" mapstructure:"model"`
	Worker            Worker            `json:"worker" mapstructure:"worker"`
	Verify            Verify            `json:"verify" mapstructure:"verify"`
	BuildVerification BuildVerification `json:"build_verification" mapstructure:"build_verification"`
	Database          Database          `json:"database" mapstructure:"database"`
	LLM               LLM               `json:"llm" mapstructure:"llm"`
	Sandbox           Sandbox           `json:"sandbox" mapstructure:"sandbox"`
	MCP               MCP               `json:"mcp" mapstructure:"mcp"`
	Integrations      Integrations      `json:"integrations" mapstructure:"integrations"`

	// Extensions beyond the documented keys.
	Worktree Worktree `json:"worktree" mapstructure:"worktree"`
	Agent    Agent    `json:"agent" mapstructure:"agent"`
	Planner  Planner  `json:"planner" mapstructure:"planner"`
}

// TaskSizeLimits bounds the size of a task; tasks above the threshold are
// split when AutoSplit is on.
type TaskSizeLimits struct {
	MaxFilesToCreate    int     `json:"max_files_to_create" mapstructure:"max_files_to_create"`
	MaxFilesToModify    int     `json:"max_files_to_modify" mapstructure:"max_files_to_modify"`
	MaxCriteriaPerTask  int     `json:"max_criteria_per_task" mapstructure:"max_criteria_per_task"`
	MaxInputTokens      int     `json:"max_input_tokens" mapstructure:"max_input_tokens"`
	MaxTimeMinutes      int     `json:"max_time_minutes" mapstructure:"max_time_minutes"`
	ComplexityThreshold float64 `json:"complexity_threshold" mapstructure:"complexity_threshold"`
	AutoSplit           bool    `json:"auto_split" mapstructure:"auto_split"`
}

// Worker selects and configures what implements a task.
type Worker struct {
	// Kind is WorkerAgent or WorkerCommand.
	Kind string `json:"kind" mapstructure:"kind"`
	// Mode is the agent mode a task starts in: a built-in mode or the slug of
	// an agent.custom_modes entry.
	Mode string `json:"mode" mapstructure:"mode"`
	// Command is the argv template of a command worker, with {prompt},
	// {task_id} and {worktree} placeholders.
	Command []string `json:"command" mapstructure:"command"`
	// Timeout bounds one worker attempt.
	Timeout Duration `json:"timeout" mapstructure:"timeout"`
	Ralph   Ralph    `json:"ralph" mapstructure:"ralph"`
	// Remote is the git remote that runs on several machines share: the
	// run pushes the commits attempts start from there, and workers push
	// their attempts back.
	Remote string `json:"remote" mapstructure:"remote"`
	// Lease is how long a worker's hold on an attempt lasts without being
	// renewed; a worker silent for longer is taken for dead and its
	// attempt goes to another worker.
	Lease Duration `json:"lease" mapstructure:"lease"`
}

// Ralph configures the rerun-with-fresh-context loop.
type Ralph struct {
	Enabled           bool   `json:"enabled" mapstructure:"enabled"`
	MaxIterations     int    `json:"max_iterations" mapstructure:"max_iterations"`
	CompletionPromise string `json:"completion_promise" mapstructure:"completion_promise"`
	// Stagnation is how many iterations in a row that change nothing stop
	// the loop as stagnating.
	Stagnation int `json:"stagnation" mapstructure:"stagnation"`
}

// Verify is the test command that decides whether a task passed.
type Verify struct {
	Command []string `json:"command" mapstructure:"command"`
	// Timeout bounds one run of the test command, and one of the build
	// command.
	Timeout Duration `json:"timeout" mapstructure:"timeout"`
}

// BuildVerification is the build command run before the tests. An empty
// command skips it.
type BuildVerification struct {
	Command []string `json:"command" mapstructure:"command"`
}

// Database selects the store: empty for the embedded SQLite file,
// postgres://… for PostgreSQL.
type Database struct {
	URL string `json:"url" mapstructure:"url"`
	// RetryFor is how long a run waits, retrying with backoff, for a store
	// that became unreachable (a restarted server, a network blip) before
	// it stops.
	RetryFor Duration `json:"retry_for" mapstructure:"retry_for"`
}

// LLM configures the requests to a real model provider. The
// scripted model ignores it.
type LLM struct {
	// MaxTokens is the output limit each request asks for.
	MaxTokens int `json:"max_tokens" mapstructure:"max_tokens"`
	// RequestTimeout bounds one request; a streamed reply that keeps
	// arriving is making progress and is not cut.
	RequestTimeout Duration `json:"request_timeout" mapstructure:"request_timeout"`
	// MaxRetries bounds the retries of a request that hit a rate limit, an
	// overload, a server error, a reset or the request timeout; 0 retries
	// nothing.
	MaxRetries int `json:"max_retries" mapstructure:"max_retries"`
	// RequestsPerMinute paces the requests of all workers of a run to one
	// provider; 0 means no pacing beyond what the provider's 429s impose.
	RequestsPerMinute int `json:"requests_per_minute" mapstructure:"requests_per_minute"`
	// PromptCache marks the stable prefix of each request (system prompt,
	// tools, the task) for the provider's prompt cache.
	PromptCache bool `json:"prompt_cache" mapstructure:"prompt_cache"`
	// APIKeyEnv names the environment variable whose value an
	// openai-compatible server gets as its key; empty sends none.
	APIKeyEnv string `json:"api_key_env" mapstructure:"api_key_env"`
}

// Sandbox confines the commands a worker runs and the verify and build
// commands.
type Sandbox struct {
	// Network lets those commands reach the network; off by default.
	Network bool `json:"network" mapstructure:"network"`
	// EnvAllow lists the environment variables those commands see; every
	// other variable is removed, and its value is redacted from what they
	// print.
	EnvAllow []string `json:"env_allow" mapstructure:"env_allow"`
}

// DefaultEnvAllow is the default of sandbox.env_allow.
var DefaultEnvAllow = proc.DefaultEnvAllow

// MCP lists the MCP servers whose tools and resources the agent's modes
// with the mcp group may use.
type MCP struct {
	Servers []MCPServer `json:"servers" mapstructure:"servers"`
}

// MCPServer is one MCP server: a stdio server started from Command (plus
// Args), or a streamable-HTTP server at URL. A stdio server runs outside
// the worker sandbox, with sandbox.env_allow of taskloom's environment
// plus Env.
type MCPServer struct {
	// Name is how the agent names the server; unique.
	Name    string   `json:"name" mapstructure:"name"`
	Command []string `json:"command,omitempty" mapstructure:"command"`
	// Args are added after Command, for configs written with a
	// command and its args apart.
	Args []string `json:"args,omitempty" mapstructure:"args"`
	// Env adds variables to a stdio server's environment, names kept as
	// written.
	Env map[string]string `json:"env,omitempty" mapstructure:"env"`
	URL string            `json:"url,omitempty" mapstructure:"url"`
}

// Integrations holds the optional third-party syncs.
type Integrations struct {
	Linear Linear `json:"linear" mapstructure:"linear"`
}

// Linear configures the optional Linear sync. Its API key comes from the
// LINEAR_API_KEY environment variable, never from the config.
type Linear struct {
	Enabled       bool   `json:"enabled" mapstructure:"enabled"`
	TeamID        string `json:"team_id" mapstructure:"team_id"`
	CreateProject bool   `json:"create_project" mapstructure:"create_project"`
	// URL is the GraphQL endpoint; empty means Linear's own
	// (https://api.linear.app/graphql).
	URL string `json:"url" mapstructure:"url"`
}

// Worktree configures the git worktrees tasks run in (extension).
type Worktree struct {
	// Include lists globs, relative to the repo root, of untracked files
	// (such as ".env") copied into every new worktree.
	Include []string `json:"include" mapstructure:"include"`
}

// Agent configures the built-in coding agent (extension).
type Agent struct {
	// MaxTurns bounds the model calls of one agent task.
	MaxTurns int `json:"max_turns" mapstructure:"max_turns"`
	// MaxConsecutiveMistakes ends a task after that many failed tool calls
	// in a row.
	MaxConsecutiveMistakes int `json:"max_consecutive_mistakes" mapstructure:"max_consecutive_mistakes"`
	// TokenBudget bounds the tokens of one task attempt; 0 means no bound.
	TokenBudget int `json:"token_budget" mapstructure:"token_budget"`
	// CostBudgetUSD bounds the cost of one task attempt; 0 means no bound.
	CostBudgetUSD float64 `json:"cost_budget_usd" mapstructure:"cost_budget_usd"`
	// ContextWindow is the model's context size in tokens.
	ContextWindow int `json:"context_window" mapstructure:"context_window"`
	// CondenseThreshold is the fraction of ContextWindow at which the
	// conversation is condensed.
	CondenseThreshold float64 `json:"condense_threshold" mapstructure:"condense_threshold"`
	// CommandAllow lists the command prefixes execute_command may run;
	// empty allows every command CommandDeny does not deny.
	CommandAllow []string `json:"command_allow" mapstructure:"command_allow"`
	// CommandDeny lists command prefixes execute_command refuses; it wins
	// over CommandAllow.
	CommandDeny []string `json:"command_deny" mapstructure:"command_deny"`
	// CommandTimeout is the default timeout of execute_command.
	CommandTimeout Duration `json:"command_timeout" mapstructure:"command_timeout"`
	// RequireTodosDone refuses attempt_completion while the todo list has
	// unfinished items.
	RequireTodosDone bool `json:"require_todos_done" mapstructure:"require_todos_done"`
	// SkillsDirs lists extra folders of skills (each skill a folder with a
	// SKILL.md), relative to the repo root or absolute. They add to the
	// default locations (~/.taskloom/skills, and .claude/skills,
	// .agents/skills and .taskloom/skills in the repo), and win over them.
	SkillsDirs []string `json:"skills_dirs" mapstructure:"skills_dirs"`
	// CustomModes adds modes to, or overrides, the built-in ones.
	CustomModes []Mode `json:"custom_modes" mapstructure:"custom_modes"`
}

// Mode is a custom agent mode, after Roo-Code's custom modes.
type Mode struct {
	Slug string `json:"slug" mapstructure:"slug"`
	Name string `json:"name" mapstructure:"name"`
	// Role is the role definition put at the top of the system prompt.
	Role string `json:"role" mapstructure:"role"`
	// Groups are the tool groups the mode may use (see ToolGroups).
	Groups []string `json:"groups" mapstructure:"groups"`
	// FileRegex, when set, restricts the edit group to paths it matches
	// (RE2 syntax).
	FileRegex string `json:"file_regex" mapstructure:"file_regex"`
}

// Planner tunes the planner's complexity heuristics (extension).
type Planner struct {
	// Keywords maps a keyword-set name to its words, replacing the
	// planner's built-in set of that name. Empty means the built-ins. The
	// set names are lowercased when loaded.
	Keywords map[string][]string `json:"keywords,omitempty" mapstructure:"keywords"`
}

// Default returns the defaults, which are also the values of the documented
// example.
func Default() Config {
	return Config{
		TaskSizeLimits: TaskSizeLimits{
			MaxFilesToCreate:    5,
			MaxFilesToModify:    8,
			MaxCriteriaPerTask:  7,
			MaxInputTokens:      6000,
			MaxTimeMinutes:      5,
			ComplexityThreshold: 5.0,
			AutoSplit:           true,
		},
		ParallelWorkers: 1,
		MaxAttempts:     3,
		Model:           "anthropic:claude-sonnet-4-5",
		Worker: Worker{
			Kind:    WorkerAgent,
			Mode:    "code",
			Command: []string{"claude", "-p", "{prompt}", "--output-format", "json"},
			Timeout: Duration{30 * time.Minute},
			Ralph:   Ralph{Enabled: false, MaxIterations: 10, CompletionPromise: "DONE", Stagnation: 3},
			Remote:  "origin",
			Lease:   Duration{30 * time.Second},
		},
		Verify:            Verify{Command: []string{"go", "test", "./..."}, Timeout: Duration{10 * time.Minute}},
		BuildVerification: BuildVerification{Command: []string{"go", "build", "./..."}},
		Database:          Database{URL: "", RetryFor: Duration{2 * time.Minute}},
		LLM:               LLM{MaxTokens: 16000, RequestTimeout: Duration{5 * time.Minute}, MaxRetries: 8, PromptCache: true},
		Sandbox:           Sandbox{Network: false, EnvAllow: slices.Clone(DefaultEnvAllow)},
		MCP:               MCP{Servers: []MCPServer{}},
		Integrations:      Integrations{Linear: Linear{Enabled: false, TeamID: "", CreateProject: true}},
		Worktree:          Worktree{Include: []string{}},
		Agent: Agent{
			MaxTurns:               50,
			MaxConsecutiveMistakes: 3,
			TokenBudget:            0,
			CostBudgetUSD:          0,
			ContextWindow:          200000,
			CondenseThreshold:      0.8,
			CommandAllow:           []string{},
			CommandDeny: []string{
				"rm -rf /", "rm -rf ~", "sudo", "git push", "git reset --hard", "git clean",
				"git checkout", "git switch", "git rebase", "git worktree", "shutdown", "reboot", "mkfs",
			},
			CommandTimeout:   Duration{5 * time.Minute},
			RequireTodosDone: true,
			SkillsDirs:       []string{},
			CustomModes:      []Mode{},
		},
	}
}

// Redacted returns a deep copy of c that is safe to print: the password of
// database.url is masked.
func (c Config) Redacted() Config {
	r := c.clone()
	r.Database.URL = RedactURL(r.Database.URL)
	// An MCP server's env is where its tokens go, and its URL may carry
	// credentials: neither is printed.
	r.MCP.Servers = slices.Clone(c.MCP.Servers)
	for i := range r.MCP.Servers {
		s := &r.MCP.Servers[i]
		s.URL = RedactURL(s.URL)
		if len(s.Env) > 0 {
			env := make(map[string]string, len(s.Env))
			for k := range s.Env {
				env[k] = mask
			}
			s.Env = env
		}
	}
	return r
}

// String returns c as indented JSON with secrets masked (see Redacted).
func (c Config) String() string {
	b, err := json.MarshalIndent(c.Redacted(), "", "  ")
	if err != nil {
		return fmt.Sprintf("config: %v", err)
	}
	return string(b)
}

// clone returns a deep copy of c.
func (c Config) clone() Config {
	r := c
	r.Worker.Command = slices.Clone(c.Worker.Command)
	r.Verify.Command = slices.Clone(c.Verify.Command)
	r.BuildVerification.Command = slices.Clone(c.BuildVerification.Command)
	r.Worktree.Include = slices.Clone(c.Worktree.Include)
	r.Sandbox.EnvAllow = slices.Clone(c.Sandbox.EnvAllow)
	r.Agent.CommandAllow = slices.Clone(c.Agent.CommandAllow)
	r.Agent.CommandDeny = slices.Clone(c.Agent.CommandDeny)
	r.Agent.SkillsDirs = slices.Clone(c.Agent.SkillsDirs)
	if c.Agent.CustomModes != nil {
		r.Agent.CustomModes = make([]Mode, len(c.Agent.CustomModes))
		for i, m := range c.Agent.CustomModes {
			m.Groups = slices.Clone(m.Groups)
			r.Agent.CustomModes[i] = m
		}
	}
	if c.MCP.Servers != nil {
		r.MCP.Servers = make([]MCPServer, len(c.MCP.Servers))
		for i, m := range c.MCP.Servers {
			m.Command, m.Args, m.Env = slices.Clone(m.Command), slices.Clone(m.Args), maps.Clone(m.Env)
			r.MCP.Servers[i] = m
		}
	}
	if c.Planner.Keywords != nil {
		r.Planner.Keywords = maps.Clone(c.Planner.Keywords)
		for k, v := range r.Planner.Keywords {
			r.Planner.Keywords[k] = slices.Clone(v)
		}
	}
	return r
}

// Duration is a time.Duration written as a Go duration string ("10m",
// "1h30m") in JSON.
type Duration struct {
	time.Duration
}

// ParseDuration parses a Go duration string such as "10m" or "1h30m".
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return Duration{}, fmt.Errorf("must be a duration like \"10m\" or \"1h30m\", got %q", s)
	}
	return Duration{d}, nil
}

// String formats d like time.Duration does, without trailing zero units
// ("10m", not "10m0s").
func (d Duration) String() string {
	s := d.Duration.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
