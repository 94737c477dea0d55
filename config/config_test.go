package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/taskloom/taskloom/llm"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"max_files_to_create", func(c *Config) { c.TaskSizeLimits.MaxFilesToCreate = 0 },
			"task_size_limits.max_files_to_create: must be at least 1, got 0"},
		{"max_files_to_modify", func(c *Config) { c.TaskSizeLimits.MaxFilesToModify = -1 },
			"task_size_limits.max_files_to_modify: must be at least 1, got -1"},
		{"max_criteria_per_task", func(c *Config) { c.TaskSizeLimits.MaxCriteriaPerTask = 0 },
			"task_size_limits.max_criteria_per_task: must be at least 1, got 0"},
		{"max_input_tokens", func(c *Config) { c.TaskSizeLimits.MaxInputTokens = 0 },
			"task_size_limits.max_input_tokens: must be at least 1, got 0"},
		{"max_time_minutes", func(c *Config) { c.TaskSizeLimits.MaxTimeMinutes = 0 },
			"task_size_limits.max_time_minutes: must be at least 1, got 0"},
		{"complexity_threshold high", func(c *Config) { c.TaskSizeLimits.ComplexityThreshold = 20 },
			"task_size_limits.complexity_threshold: must be between 0 and 13, got 20"},
		{"complexity_threshold low", func(c *Config) { c.TaskSizeLimits.ComplexityThreshold = -0.5 },
			"task_size_limits.complexity_threshold: must be between 0 and 13, got -0.5"},
		{"parallel_workers", func(c *Config) { c.ParallelWorkers = -1 },
			"parallel_workers: must be at least 0, got -1"},
		{"max_attempts", func(c *Config) { c.MaxAttempts = 0 },
			"max_attempts: must be at least 1, got 0"},
		{"model", func(c *Config) { c.Model = "gpt-4o" },
			`model: bad model spec "gpt-4o": missing "PROVIDER:" prefix; accepted forms: "anthropic:MODEL", "openai:MODEL", "openai-compatible:MODEL@BASE_URL", "scripted:PATH"`},
		{"worker.kind", func(c *Config) { c.Worker.Kind = "robot" },
			`worker.kind: must be "agent" or "command", got "robot"`},
		{"worker.mode", func(c *Config) { c.Worker.Mode = "docs" },
			`worker.mode: must be one of code, architect, ask, debug, orchestrator, got "docs"`},
		{"worker.command for a command worker", func(c *Config) { c.Worker.Kind = WorkerCommand; c.Worker.Command = nil },
			"worker.command: must not be empty"},
		{"worker.command program", func(c *Config) { c.Worker.Command = []string{" ", "-p"} },
			`worker.command[0]: must name a program, got " "`},
		{"worker.timeout", func(c *Config) { c.Worker.Timeout = Duration{} },
			`worker.timeout: must be a positive duration like "10m", got "0s"`},
		{"ralph.max_iterations", func(c *Config) { c.Worker.Ralph.MaxIterations = 0 },
			"worker.ralph.max_iterations: must be at least 1, got 0"},
		{"ralph.stagnation", func(c *Config) { c.Worker.Ralph.Stagnation = 0 },
			"worker.ralph.stagnation: must be at least 1, got 0"},
		{"ralph.completion_promise", func(c *Config) { c.Worker.Ralph.CompletionPromise = "" },
			"worker.ralph.completion_promise: must not be empty"},
		{"verify.command", func(c *Config) { c.Verify.Command = []string{} },
			"verify.command: must not be empty"},
		{"verify.timeout", func(c *Config) { c.Verify.Timeout = Duration{-time.Minute} },
			`verify.timeout: must be a positive duration like "10m", got "-1m"`},
		{"build_verification.command", func(c *Config) { c.BuildVerification.Command = []string{""} },
			`build_verification.command[0]: must name a program, got ""`},
		{"parallel_workers", func(c *Config) { c.ParallelWorkers = 1e9 },
			"parallel_workers: must be at most 256, got 1000000000"},
		{"database.url", func(c *Config) { c.Database.URL = "host=127.0.0.1 password=hunter2" },
			"database.url: a key=value connection string is not supported: write it as a URL, postgres://USER:PASSWORD@HOST:PORT/DATABASE"},
		{"database.url", func(c *Config) { c.Database.URL = "postgres://u:p@ssw0rd@h:5432/db@team" },
			"database.url: the user name or password holds an @: write it as %40, as in postgres://USER:PASS%40WORD@HOST:PORT/DATABASE"},
		{"database.url", func(c *Config) { c.Database.URL = "mysql://root:hunter2@h/db" },
			`database.url: must be empty, a postgres:// URL or a SQLite file path, got "mysql://root:xxxxx@h/db"`},
		{"llm.max_tokens", func(c *Config) { c.LLM.MaxTokens = 0 },
			"llm.max_tokens: must be at least 1, got 0"},
		{"llm.request_timeout", func(c *Config) { c.LLM.RequestTimeout = Duration{} },
			`llm.request_timeout: must be a positive duration like "10m", got "0s"`},
		{"llm.max_retries", func(c *Config) { c.LLM.MaxRetries = -1 },
			"llm.max_retries: must be at least 0, got -1"},
		{"llm.requests_per_minute", func(c *Config) { c.LLM.RequestsPerMinute = -5 },
			"llm.requests_per_minute: must be at least 0, got -5"},
		{"llm.api_key_env", func(c *Config) { c.LLM.APIKeyEnv = "MY KEY" },
			`llm.api_key_env: must be empty or an environment variable name, got "MY KEY"`},
		{"linear.team_id", func(c *Config) { c.Integrations.Linear.Enabled = true },
			"integrations.linear.team_id: must be set when integrations.linear.enabled is true"},
		{"worktree.include empty", func(c *Config) { c.Worktree.Include = []string{".env", ""} },
			"worktree.include[1]: must not be empty"},
		{"worktree.include outside", func(c *Config) { c.Worktree.Include = []string{"../secrets/.env"} },
			`worktree.include[0]: must be a glob relative to the repo root without "..", got "../secrets/.env"`},
		{"worktree.include absolute", func(c *Config) { c.Worktree.Include = []string{"/etc/passwd"} },
			`worktree.include[0]: must be a glob relative to the repo root without "..", got "/etc/passwd"`},
		{"worktree.include bad glob", func(c *Config) { c.Worktree.Include = []string{"config/[a-"} },
			`worktree.include[0]: must be a valid glob, got "config/[a-"`},
		{"agent.max_turns", func(c *Config) { c.Agent.MaxTurns = 0 },
			"agent.max_turns: must be at least 1, got 0"},
		{"agent.max_consecutive_mistakes", func(c *Config) { c.Agent.MaxConsecutiveMistakes = 0 },
			"agent.max_consecutive_mistakes: must be at least 1, got 0"},
		{"agent.token_budget", func(c *Config) { c.Agent.TokenBudget = -1 },
			"agent.token_budget: must be at least 0, got -1"},
		{"agent.cost_budget_usd", func(c *Config) { c.Agent.CostBudgetUSD = -0.01 },
			"agent.cost_budget_usd: must be at least 0, got -0.01"},
		{"agent.context_window", func(c *Config) { c.Agent.ContextWindow = 10 },
			"agent.context_window: must be at least 1000, got 10"},
		{"agent.condense_threshold zero", func(c *Config) { c.Agent.CondenseThreshold = 0 },
			"agent.condense_threshold: must be greater than 0 and at most 1, got 0"},
		{"agent.condense_threshold high", func(c *Config) { c.Agent.CondenseThreshold = 1.5 },
			"agent.condense_threshold: must be greater than 0 and at most 1, got 1.5"},
		{"agent.command_allow", func(c *Config) { c.Agent.CommandAllow = []string{"go test", " "} },
			"agent.command_allow[1]: must not be empty"},
		{"agent.command_deny", func(c *Config) { c.Agent.CommandDeny = []string{""} },
			"agent.command_deny[0]: must not be empty"},
		{"agent.command_timeout", func(c *Config) { c.Agent.CommandTimeout = Duration{} },
			`agent.command_timeout: must be a positive duration like "10m", got "0s"`},
		{"agent.skills_dirs", func(c *Config) { c.Agent.SkillsDirs = []string{""} },
			"agent.skills_dirs[0]: must not be empty"},
		{"custom mode slug", func(c *Config) { c.Agent.CustomModes = []Mode{{Slug: "Docs", Name: "Docs"}} },
			`agent.custom_modes[0].slug: must be lowercase letters, digits and "-", got "Docs"`},
		{"custom mode duplicate", func(c *Config) {
			c.Agent.CustomModes = []Mode{{Slug: "docs", Name: "Docs"}, {Slug: "docs", Name: "Docs 2"}}
		}, `agent.custom_modes[1].slug: must be unique, "docs" is used twice`},
		{"custom mode name", func(c *Config) { c.Agent.CustomModes = []Mode{{Slug: "docs"}} },
			"agent.custom_modes[0].name: must not be empty"},
		{"custom mode group", func(c *Config) {
			c.Agent.CustomModes = []Mode{{Slug: "docs", Name: "Docs", Groups: []string{"read", "browser"}}}
		}, `agent.custom_modes[0].groups[1]: must be one of read, edit, command, modes, mcp, got "browser"`},
		{"custom mode regex", func(c *Config) {
			c.Agent.CustomModes = []Mode{{Slug: "docs", Name: "Docs", FileRegex: `(\.md$`}}
		}, "agent.custom_modes[0].file_regex: must be a valid RE2 regex: error parsing regexp: missing closing ): `(\\.md$`"},
		{"planner.keywords", func(c *Config) { c.Planner.Keywords = map[string][]string{"data": {"sql", ""}} },
			"planner.keywords.data[1]: must not be empty"},
		{"mcp server name", func(c *Config) { c.MCP.Servers = []MCPServer{{Name: "my server", Command: []string{"x"}}} },
			`mcp.servers[0].name: must be letters, digits, "_", "." and "-", got "my server"`},
		{"mcp server duplicate", func(c *Config) {
			c.MCP.Servers = []MCPServer{{Name: "fs", Command: []string{"x"}}, {Name: "fs", URL: "http://127.0.0.1/mcp"}}
		}, `mcp.servers[1].name: must be unique, "fs" is used twice`},
		{"mcp server neither", func(c *Config) { c.MCP.Servers = []MCPServer{{Name: "fs"}} },
			"mcp.servers[0]: must have a command (stdio) or a url (streamable HTTP)"},
		{"mcp server both", func(c *Config) {
			c.MCP.Servers = []MCPServer{{Name: "fs", Command: []string{"x"}, URL: "http://127.0.0.1/mcp"}}
		}, "mcp.servers[0]: must have either command (stdio) or url (streamable HTTP), not both"},
		{"mcp server url", func(c *Config) { c.MCP.Servers = []MCPServer{{Name: "web", URL: "ftp://host/mcp"}} },
			`mcp.servers[0].url: must be an http:// or https:// URL, got "ftp://host/mcp"`},
		{"mcp server program", func(c *Config) { c.MCP.Servers = []MCPServer{{Name: "fs", Command: []string{" "}}} },
			`mcp.servers[0].command[0]: must name a program, got " "`},
		{"mcp server env", func(c *Config) {
			c.MCP.Servers = []MCPServer{{Name: "fs", Command: []string{"x"}, Env: map[string]string{"A=B": "1"}}}
		}, `mcp.servers[0].env: must map environment variable names to values, got the name "A=B"`},
		{"linear url", func(c *Config) { c.Integrations.Linear.URL = "api.linear.app/graphql" },
			`integrations.linear.url: must be an http:// or https:// URL, got "api.linear.app/graphql"`},
		{"linear url over plain http", func(c *Config) { c.Integrations.Linear.URL = "http://192.0.2.2:8080/graphql" },
			`integrations.linear.url: must be https, or a loopback address: the API key is sent to it, got "http://192.0.2.2:8080/graphql"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tt.modify(&c)
			err := c.Validate()
			require.EqualError(t, err, tt.want)
			var ke *KeyError
			require.ErrorAs(t, err, &ke)
			require.True(t, strings.HasPrefix(tt.want, ke.Key+": "), "key %q", ke.Key)
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	c := Default()
	c.ParallelWorkers = -2
	c.TaskSizeLimits.ComplexityThreshold = 20
	err := c.Validate()
	require.EqualError(t, err, "task_size_limits.complexity_threshold: must be between 0 and 13, got 20; "+
		"parallel_workers: must be at least 0, got -2")
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Len(t, ve.Problems, 2)
}

func TestValidateAccepts(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Model = "openai-compatible:llama3.1:8b@http://localhost:11434/v1"
	c.Worker.Kind = WorkerCommand
	c.Worker.Mode = "review"
	c.Agent.CustomModes = []Mode{{Slug: "review", Name: "Review", Groups: []string{"read"}, FileRegex: `\.md$`}}
	c.Database.URL = "postgresql://u:p@localhost:5432/db?sslmode=disable"
	c.TaskSizeLimits.ComplexityThreshold = 13
	c.Agent.CondenseThreshold = 1
	c.BuildVerification.Command = nil
	c.Integrations.Linear = Linear{Enabled: true, TeamID: "ENG"}
	c.Worktree.Include = []string{".env", "config/*.local"}
	require.NoError(t, c.Validate())
}

func TestModelErrorWrapsLLM(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Model = "ollama:llama3"
	require.True(t, errors.Is(c.Validate(), llm.ErrBadSpec))
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{"postgres://u:s3cret@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"postgres://u:p@ss/w@rd@h/db?sslmode=disable", "postgres://u:xxxxx@h/db?sslmode=disable"},
		{"postgres://h/db?user=u&password=s3cret&sslmode=disable", "postgres://h/db?user=u&password=xxxxx&sslmode=disable"},
		{"host=h user=u password=s3cret dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"host=h password='s3 cret' dbname=db", "host=h password=xxxxx dbname=db"},
		{".taskloom/taskloom.db", ".taskloom/taskloom.db"},
		{"https://user:pw@mcp.example.com/mcp?token=abc&x=1", "https://user:xxxxx@mcp.example.com/mcp?token=xxxxx&x=1"},
		{"https://mcp.example.com/mcp?api_key=abc", "https://mcp.example.com/mcp?api_key=xxxxx"},
		{"http://127.0.0.1:1/mcp?auth=SECRET3&x=1", "http://127.0.0.1:1/mcp?auth=xxxxx&x=1"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, RedactURL(tt.in), "RedactURL(%q)", tt.in)
	}
	// In a message, each URL as it is quoted there.
	msg := `initialize: Post "http://u:***@h:1/mcp?token=abc": dial tcp h:1: refused; see https://x.test/?key=k1`
	require.Equal(t, `initialize: Post "http://u:xxxxx@h:1/mcp?token=xxxxx": dial tcp h:1: refused; see https://x.test/?key=xxxxx`, RedactURLs(msg))
	require.Equal(t, []string{"abc", "pw"}, URLSecrets("https://user:pw@mcp.example.com/mcp?token=abc&x=1"))
	require.Empty(t, URLSecrets("https://mcp.example.com/mcp?x=1"))
}

func TestRedactedAndString(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Database.URL = "postgres://taskloom:s3cret@db:5432/taskloom"
	c.Agent.CustomModes = []Mode{{Slug: "docs", Name: "Docs", Groups: []string{"read"}}}
	c.MCP.Servers = []MCPServer{
		{Name: "db", Command: []string{"db-mcp"}, Env: map[string]string{"API_TOKEN": "tok_s3cret", "DATABASE_URL": "postgres://u:s3cret@h/db"}},
		{Name: "web", URL: "https://u:s3cret@mcp.example.com/mcp?token=s3cret"},
	}

	r := c.Redacted()
	require.Equal(t, map[string]string{"API_TOKEN": "xxxxx", "DATABASE_URL": "xxxxx"}, r.MCP.Servers[0].Env)
	require.Equal(t, "tok_s3cret", c.MCP.Servers[0].Env["API_TOKEN"], "the original is untouched")
	require.Equal(t, "https://u:xxxxx@mcp.example.com/mcp?token=xxxxx", r.MCP.Servers[1].URL)
	require.Equal(t, "postgres://taskloom:xxxxx@db:5432/taskloom", r.Database.URL)
	require.Equal(t, "postgres://taskloom:s3cret@db:5432/taskloom", c.Database.URL, "the original is untouched")
	r.Agent.CustomModes[0].Groups[0] = "edit"
	r.Verify.Command[0] = "make"
	require.Equal(t, "read", c.Agent.CustomModes[0].Groups[0], "Redacted is a deep copy")
	require.Equal(t, "go", c.Verify.Command[0], "Redacted is a deep copy")

	s := c.String()
	require.NotContains(t, s, "s3cret")
	require.Contains(t, s, `"url": "postgres://taskloom:xxxxx@db:5432/taskloom"`)
	require.Contains(t, s, `"timeout": "10m"`)
	var back Config
	require.NoError(t, json.Unmarshal([]byte(s), &back))
	require.Equal(t, c.Redacted(), back, "String is JSON that reads back")
}

func TestDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want string
	}{
		{10 * time.Minute, "10m"},
		{90 * time.Minute, "1h30m"},
		{2 * time.Hour, "2h"},
		{90 * time.Second, "1m30s"},
		{1500 * time.Millisecond, "1.5s"},
		{0, "0s"},
	}
	for _, tt := range tests {
		got := Duration{tt.d}.String()
		require.Equal(t, tt.want, got, "Duration(%v)", tt.d)
		back, err := ParseDuration(got)
		require.NoError(t, err)
		require.Equal(t, tt.d, back.Duration, "round trip of %q", got)
	}
	_, err := ParseDuration("10 minutes")
	require.EqualError(t, err, `must be a duration like "10m" or "1h30m", got "10 minutes"`)
	var d Duration
	require.Error(t, json.Unmarshal([]byte(`"soon"`), &d))
}

func TestDistance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"paralel_workers", "parallel_workers", 1},
		{"nmae", "name", 1},
		{"kitten", "sitting", 3},
		{"model", "model", 0},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, distance(tt.a, tt.b), "distance(%q, %q)", tt.a, tt.b)
		require.Equal(t, tt.want, distance(tt.b, tt.a), "distance(%q, %q)", tt.b, tt.a)
	}
}

func TestEnvNames(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"parallel_workers":                      {"TASKLOOM_PARALLEL_WORKERS"},
		"model":                                 {"TASKLOOM_MODEL"},
		"max_attempts":                          {"TASKLOOM_MAX_ATTEMPTS"},
		"database.url":                          {"TASKLOOM_DB", "TASKLOOM_DATABASE_URL"},
		"task_size_limits.complexity_threshold": {"TASKLOOM_TASK_SIZE_LIMITS_COMPLEXITY_THRESHOLD"},
		"worker.ralph.max_iterations":           {"TASKLOOM_WORKER_RALPH_MAX_ITERATIONS"},
		"agent.custom_modes":                    nil,
		"planner.keywords":                      nil,
	}
	for key, names := range want {
		l, ok := findLeaf(key)
		require.True(t, ok, key)
		require.Equal(t, names, l.env, key)
	}
}

// An @ in the path or the query of a database URL names nothing twice:
// only the user name and password must write theirs as %40.
func TestDatabaseURLWithAnAtElsewhere(t *testing.T) {
	for _, u := range []string{"postgres://me:secret@db.example.com:5432/team@db", "file:///srv/me@corp/taskloom.db",
		"postgres://me:p%40ss@[::1]:5432/db?application_name=a@b"} {
		c := Default()
		c.Database.URL = u
		require.NoError(t, c.Validate(), u)
	}
}
