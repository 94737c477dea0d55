package config

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/taskloom/taskloom/llm"
)

var slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// envName is what llm.api_key_env may name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MaxWorkers bounds parallel_workers: each worker is a worktree, a
// process and a model conversation, and the schedule estimate allocates
// per worker.
const MaxWorkers = 256

// libpqDSN matches a libpq key=value connection string: "host=h user=u".
var libpqDSN = regexp.MustCompile(`(?i)(^|\s)(host|hostaddr|port|dbname|user|password|passfile|sslmode|service|connect_timeout|application_name)\s*=`)

// Validate checks every rule of the config and returns a *ValidationError
// listing each broken one as a *KeyError, or nil.
func (c Config) Validate() error {
	var p problems

	t := c.TaskSizeLimits
	p.atLeast("task_size_limits.max_files_to_create", t.MaxFilesToCreate, 1)
	p.atLeast("task_size_limits.max_files_to_modify", t.MaxFilesToModify, 1)
	p.atLeast("task_size_limits.max_criteria_per_task", t.MaxCriteriaPerTask, 1)
	p.atLeast("task_size_limits.max_input_tokens", t.MaxInputTokens, 1)
	p.atLeast("task_size_limits.max_time_minutes", t.MaxTimeMinutes, 1)
	p.between("task_size_limits.complexity_threshold", t.ComplexityThreshold, 0, 13)

	p.atLeast("parallel_workers", c.ParallelWorkers, 0)
	if c.ParallelWorkers > MaxWorkers {
		p.add("parallel_workers", "must be at most %d, got %d", MaxWorkers, c.ParallelWorkers)
	}
	p.atLeast("max_attempts", c.MaxAttempts, 1)
	if _, err := llm.ParseSpec(c.Model); err != nil {
		p = append(p, &KeyError{Key: "model", Rule: err.Error(), Err: err})
	}

	w := c.Worker
	if w.Kind != WorkerAgent && w.Kind != WorkerCommand {
		p.add("worker.kind", "must be %q or %q, got %q", WorkerAgent, WorkerCommand, w.Kind)
	}
	modes := slices.Clone(BuiltinModes)
	for _, m := range c.Agent.CustomModes {
		modes = append(modes, m.Slug)
	}
	if !slices.Contains(modes, w.Mode) {
		p.add("worker.mode", "must be one of %s, got %q", strings.Join(modes, ", "), w.Mode)
	}
	if w.Kind == WorkerCommand || len(w.Command) > 0 {
		p.command("worker.command", w.Command, w.Kind == WorkerCommand)
	}
	p.positive("worker.timeout", w.Timeout)
	p.positive("worker.lease", w.Lease)
	p.atLeast("worker.ralph.max_iterations", w.Ralph.MaxIterations, 1)
	p.atLeast("worker.ralph.stagnation", w.Ralph.Stagnation, 1)
	if strings.TrimSpace(w.Ralph.CompletionPromise) == "" {
		p.add("worker.ralph.completion_promise", "must not be empty")
	}

	p.command("verify.command", c.Verify.Command, true)
	p.positive("verify.timeout", c.Verify.Timeout)
	p.command("build_verification.command", c.BuildVerification.Command, false)

	if u := c.Database.URL; strings.Contains(u, "://") {
		scheme, _, _ := strings.Cut(u, "://")
		if !slices.Contains([]string{"postgres", "postgresql", "sqlite", "file"}, strings.ToLower(scheme)) {
			p.add("database.url", "must be empty, a postgres:// URL or a SQLite file path, got %q", RedactURL(u))
		}
		_, rest, _ := strings.Cut(u, "://")
		if authority, _, _ := strings.Cut(rest, "/"); strings.Count(strings.SplitN(authority, "?", 2)[0], "@") > 1 {
			// Parsers split such a URL at different @s: the rest of the
			// password would be taken for the host, and sent to DNS.
			p.add("database.url", "the user name or password holds an @: write it as %%40, as in postgres://USER:PASS%%40WORD@HOST:PORT/DATABASE")
		}
	} else if libpqDSN.MatchString(u) {
		// Taken for a SQLite path, it would make a file named after the
		// password in the current folder.
		p.add("database.url", "a key=value connection string is not supported: write it as a URL, postgres://USER:PASSWORD@HOST:PORT/DATABASE")
	}
	p.positive("database.retry_for", c.Database.RetryFor)
	p.atLeast("llm.max_tokens", c.LLM.MaxTokens, 1)
	p.positive("llm.request_timeout", c.LLM.RequestTimeout)
	p.atLeast("llm.max_retries", c.LLM.MaxRetries, 0)
	p.atLeast("llm.requests_per_minute", c.LLM.RequestsPerMinute, 0)
	if name := c.LLM.APIKeyEnv; name != "" && !envName.MatchString(name) {
		p.add("llm.api_key_env", "must be empty or an environment variable name, got %q", name)
	}
	for i, name := range c.Sandbox.EnvAllow {
		if strings.TrimSpace(name) == "" || strings.ContainsAny(name, "= \t") {
			p.add(fmt.Sprintf("sandbox.env_allow[%d]", i), "must be an environment variable name, got %q", name)
		}
	}
	p.mcpServers(c.MCP.Servers)
	if l := c.Integrations.Linear; l.Enabled && strings.TrimSpace(l.TeamID) == "" {
		p.add("integrations.linear.team_id", "must be set when integrations.linear.enabled is true")
	}
	if u := c.Integrations.Linear.URL; u != "" {
		p.httpURL("integrations.linear.url", u)
		// The Linear API key goes with every request.
		if parsed, err := url.Parse(u); err == nil && parsed.Scheme == "http" && !llm.IsLoopback(parsed.Hostname()) {
			p.add("integrations.linear.url", "must be https, or a loopback address: the API key is sent to it, got %q", RedactURL(u))
		}
	}

	for i, g := range c.Worktree.Include {
		key := fmt.Sprintf("worktree.include[%d]", i)
		switch {
		case strings.TrimSpace(g) == "":
			p.add(key, "must not be empty")
		case filepath.IsAbs(g) || path.IsAbs(g) || slices.Contains(strings.Split(filepath.ToSlash(g), "/"), ".."):
			p.add(key, "must be a glob relative to the repo root without \"..\", got %q", g)
		default:
			if _, err := path.Match(g, g); err != nil {
				p.add(key, "must be a valid glob, got %q", g)
			}
		}
	}

	a := c.Agent
	p.atLeast("agent.max_turns", a.MaxTurns, 1)
	p.atLeast("agent.max_consecutive_mistakes", a.MaxConsecutiveMistakes, 1)
	p.atLeast("agent.token_budget", a.TokenBudget, 0)
	if !(a.CostBudgetUSD >= 0) {
		p.add("agent.cost_budget_usd", "must be at least 0, got %g", a.CostBudgetUSD)
	}
	p.atLeast("agent.context_window", a.ContextWindow, 1000)
	if !(a.CondenseThreshold > 0 && a.CondenseThreshold <= 1) {
		p.add("agent.condense_threshold", "must be greater than 0 and at most 1, got %g", a.CondenseThreshold)
	}
	p.nonEmpty("agent.command_allow", a.CommandAllow)
	p.nonEmpty("agent.command_deny", a.CommandDeny)
	p.positive("agent.command_timeout", a.CommandTimeout)
	p.nonEmpty("agent.skills_dirs", a.SkillsDirs)
	seen := map[string]bool{}
	for i, m := range a.CustomModes {
		key := fmt.Sprintf("agent.custom_modes[%d]", i)
		p.uniqueName(key+".slug", m.Slug, slugPattern, `lowercase letters, digits and "-"`, seen)
		if strings.TrimSpace(m.Name) == "" {
			p.add(key+".name", "must not be empty")
		}
		for j, g := range m.Groups {
			if !slices.Contains(ToolGroups, g) {
				p.add(fmt.Sprintf("%s.groups[%d]", key, j), "must be one of %s, got %q", strings.Join(ToolGroups, ", "), g)
			}
		}
		if m.FileRegex != "" {
			if _, err := regexp.Compile(m.FileRegex); err != nil {
				p = append(p, &KeyError{Key: key + ".file_regex", Rule: "must be a valid RE2 regex: " + err.Error(), Err: err})
			}
		}
	}

	for _, name := range slices.Sorted(maps.Keys(c.Planner.Keywords)) {
		p.nonEmpty("planner.keywords."+name, c.Planner.Keywords[name])
	}
	return p.err()
}

// uniqueName checks the name of one entry of a list: made of chars
// (pattern) and used by no earlier entry (seen, which it extends).
func (p *problems) uniqueName(key, name string, pattern *regexp.Regexp, chars string, seen map[string]bool) {
	switch {
	case !pattern.MatchString(name):
		p.add(key, "must be "+chars+", got %q", name)
	case seen[name]:
		p.add(key, "must be unique, %q is used twice", name)
	}
	seen[name] = true
}

var serverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// mcpServers checks mcp.servers: unique names, and each either a stdio
// command or a URL.
func (p *problems) mcpServers(servers []MCPServer) {
	seen := map[string]bool{}
	for i, s := range servers {
		key := fmt.Sprintf("mcp.servers[%d]", i)
		p.uniqueName(key+".name", s.Name, serverName, `letters, digits, "_", "." and "-"`, seen)
		switch {
		case len(s.Command) > 0 && s.URL != "":
			p.add(key, "must have either command (stdio) or url (streamable HTTP), not both")
		case len(s.Command) == 0 && s.URL == "":
			p.add(key, "must have a command (stdio) or a url (streamable HTTP)")
		case s.URL != "":
			p.httpURL(key+".url", s.URL)
			if len(s.Args) > 0 || len(s.Env) > 0 {
				p.add(key, "args and env apply to stdio servers only, not to a url")
			}
		default:
			p.command(key+".command", s.Command, true)
		}
		for name := range s.Env {
			if !envName.MatchString(name) {
				p.add(key+".env", "must map environment variable names to values, got the name %q", name)
			}
		}
	}
}

// httpURL checks that u is an absolute http or https URL.
func (p *problems) httpURL(key, u string) {
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		p.add(key, "must be an http:// or https:// URL, got %q", RedactURL(u))
	}
}

func (p *problems) atLeast(key string, v, lo int) {
	if v < lo {
		p.add(key, "must be at least %d, got %d", lo, v)
	}
}

func (p *problems) between(key string, v, lo, hi float64) {
	if !(v >= lo && v <= hi) {
		p.add(key, "must be between %g and %g, got %g", lo, hi, v)
	}
}

func (p *problems) positive(key string, d Duration) {
	if d.Duration <= 0 {
		p.add(key, "must be a positive duration like \"10m\", got %q", d.String())
	}
}

// command checks an argv: when required it must have a program; when set,
// the program must not be empty.
func (p *problems) command(key string, argv []string, required bool) {
	switch {
	case len(argv) == 0 && required:
		p.add(key, "must not be empty")
	case len(argv) > 0 && strings.TrimSpace(argv[0]) == "":
		p.add(key+"[0]", "must name a program, got %q", argv[0])
	}
}

// nonEmpty checks that no entry of a list is blank.
func (p *problems) nonEmpty(key string, l []string) {
	for i, s := range l {
		if strings.TrimSpace(s) == "" {
			p.add(fmt.Sprintf("%s[%d]", key, i), "must not be empty")
		}
	}
}
