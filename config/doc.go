// Package config holds taskloom's configuration schema, the content of
// .project-config.json, and loads it.
//
// # Precedence
//
// Load merges four layers with one viper instance per call (never viper's
// global one). Each key takes its value from the first layer that sets it:
//
//  1. command-line flags the user set, through LoadOpts.FlagKeys (for
//     example --workers → parallel_workers, --db → database.url);
//  2. environment variables: TASKLOOM_ and the key uppercased with "_" for
//     ".", such as TASKLOOM_PARALLEL_WORKERS, TASKLOOM_MODEL,
//     TASKLOOM_MAX_ATTEMPTS, TASKLOOM_VERIFY_TIMEOUT or
//     TASKLOOM_TASK_SIZE_LIMITS_COMPLEXITY_THRESHOLD. database.url is also
//     TASKLOOM_DB, which wins over TASKLOOM_DATABASE_URL. Empty variables
//     count as unset. Lists (verify.command, …) are a JSON array of strings
//     or whitespace-separated words. agent.custom_modes and
//     planner.keywords have no variable;
//  3. the config file: LoadOpts.ConfigFile (--config) when given, else
//     .project-config.json at the root of the repo when it exists;
//  4. Default(), whose values are those of the documented example.
//
// # Errors
//
// The file is strict. Malformed JSON is a *SyntaxError naming the file,
// line and column. Unknown keys at any depth are *UnknownKeyError problems
// with the closest known key ("did you mean parallel_workers?"); a key that
// looks like a secret (api_key, token, password, …) says that API keys come
// from the provider's environment variable (ANTHROPIC_API_KEY,
// OPENAI_API_KEY) and never from the config. A value of the wrong JSON type
// is a *KeyError. Environment variables and flags that do not parse as
// their key's type are *KeyError problems naming the variable or flag.
// Finally Config.Validate checks the rules below; Load adds to each
// *KeyError where its value came from. All problems of one stage come
// together in a *ValidationError, on one line:
//
//	task_size_limits.complexity_threshold: must be between 0 and 13, got 20 (from .project-config.json)
//
// Rules: the task_size_limits counts, parallel_workers, max_attempts,
// worker.ralph.max_iterations, agent.max_turns and
// agent.max_consecutive_mistakes are at least 1; complexity_threshold is in
// 0–13, the complexity scale of the product contract; model is a model spec
// (llm.ParseSpec); worker.kind is agent or command; worker.mode is a
// built-in mode (BuiltinModes) or a custom mode's slug; a command worker
// needs worker.command; verify.command is not empty; durations ("10m",
// "1h30m", parsed by time.ParseDuration) are positive; database.url is
// empty, a postgres:// URL or a SQLite path; Linear needs team_id when
// enabled; agent budgets are at least 0, context_window at least 1000 and
// condense_threshold in (0, 1]; llm.max_tokens is at least 1,
// llm.max_retries and llm.requests_per_minute at least 0, and
// llm.api_key_env empty or a variable name; custom modes have a unique lowercase slug,
// a name, known tool groups (ToolGroups) and a valid file_regex; worktree
// globs are relative and valid.
//
// # Secrets
//
// API keys never live in the config; they come from the provider's usual
// environment variables. Config.Redacted and Config.String mask the
// password of database.url, so a config is safe to print or log.
//
// # Extensions beyond the documented keys
//
// taskloom adds these keys, all optional, to the documented ones:
//
//   - worker.timeout (default "30m"): the bound on one worker attempt.
//   - worktree.include (default []): globs of untracked files, such as
//     ".env", copied from the repo into each new worktree.
//   - agent: the built-in coding agent's limits. max_turns 50,
//     max_consecutive_mistakes 3, token_budget 0 and cost_budget_usd 0
//     (0 = no budget), context_window 200000, condense_threshold 0.8,
//     command_allow [] (empty allows every command not denied),
//     command_deny (prefixes such as "rm -rf /" and "git push"),
//     command_timeout "5m", require_todos_done true, skills_dirs [] (extra
//     folders of skills, each skill a folder with a SKILL.md, added to the
//     default locations) and custom_modes [] ({slug, name, role, groups,
//     file_regex}, after Roo-Code's custom modes). context_window is the
//     agent's default too (agent.DefaultContextWindow).
//   - planner.keywords (default empty): named keyword sets that replace the
//     planner's built-in sets of those names for complexity scoring. Viper
//     lowercases the set names.
package config
