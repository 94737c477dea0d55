package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// clearEnv blanks every TASKLOOM_* variable Load reads, so the tests do not
// see the developer's environment. Viper treats empty variables as unset.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, l := range leaves() {
		for _, name := range l.env {
			t.Setenv(name, "")
		}
	}
}

// writeConfig writes content as the repo config of a new temp dir and
// returns the dir and the file's path.
func writeConfig(t *testing.T, content string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, FileName)
	require.NoError(t, os.WriteFile(file, []byte(content), 0o644))
	return dir, file
}

func TestExampleFilesAreTheDefaults(t *testing.T) {
	clearEnv(t)
	for _, file := range []string{
		"testdata/spec_example.json",      // the documented example, verbatim
		"../.project-config.example.json", // the repo's example, with the extensions
	} {
		t.Run(file, func(t *testing.T) {
			got, err := Load(LoadOpts{ConfigFile: file})
			require.NoError(t, err)
			require.Equal(t, Default(), got)
		})
	}
}

func TestRepoExampleHasEveryKey(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../.project-config.example.json")
	require.NoError(t, err)
	v, err := decodeFile("example", data)
	require.NoError(t, err)
	for _, key := range allKeys() {
		_, ok := lookupPath(v, key)
		require.True(t, ok, "the example lacks %s", key)
	}
}

func TestDefaultIsValid(t *testing.T) {
	t.Parallel()
	require.NoError(t, Default().Validate())
}

func TestTagsAgree(t *testing.T) {
	t.Parallel()
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			jsonName, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			require.NotEmpty(t, jsonName, "%s.%s has no json tag", typ.Name(), f.Name)
			require.Equal(t, jsonName, f.Tag.Get("mapstructure"), "%s.%s", typ.Name(), f.Name)
			ft := f.Type
			for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != durationType {
				walk(ft)
			}
		}
	}
	walk(reflect.TypeFor[Config]())
}

// layered is one value per precedence layer for the keys under test.
type layered struct {
	workers   int
	model     string
	db        string
	threshold float64
	timeout   time.Duration
	command   []string
}

func TestPrecedence(t *testing.T) {
	def := layered{1, "anthropic:claude-sonnet-4-5", "", 5, 10 * time.Minute, []string{"go", "test", "./..."}}
	file := layered{2, "openai:gpt-4o", "postgres://file@h/db", 6, 20 * time.Minute, []string{"make", "test"}}
	env := layered{3, "scripted:env.json", "postgres://env@h/db", 7, 30 * time.Minute, []string{"go", "test", "-race", "./..."}}
	flag := layered{4, "scripted:flag.json", "postgres://flag@h/db", 8, 40 * time.Minute, []string{"gotestsum", "./..."}}

	const fileJSON = `{"parallel_workers": 2, "model": "openai:gpt-4o", "database": {"url": "postgres://file@h/db"},
		"task_size_limits": {"complexity_threshold": 6}, "verify": {"timeout": "20m", "command": ["make", "test"]}}`

	tests := []struct {
		name             string
		file, env, flags bool
		want             layered
	}{
		{name: "defaults", want: def},
		{name: "file beats defaults", file: true, want: file},
		{name: "env beats defaults", env: true, want: env},
		{name: "env beats file", file: true, env: true, want: env},
		{name: "flags beat defaults", flags: true, want: flag},
		{name: "flags beat file", file: true, flags: true, want: flag},
		{name: "flags beat env and file", file: true, env: true, flags: true, want: flag},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			dir := t.TempDir()
			if tt.file {
				dir, _ = writeConfig(t, fileJSON)
			}
			if tt.env {
				t.Setenv("TASKLOOM_PARALLEL_WORKERS", "3")
				t.Setenv("TASKLOOM_MODEL", "scripted:env.json")
				t.Setenv("TASKLOOM_DB", "postgres://env@h/db")
				t.Setenv("TASKLOOM_TASK_SIZE_LIMITS_COMPLEXITY_THRESHOLD", "7")
				t.Setenv("TASKLOOM_VERIFY_TIMEOUT", "30m")
				t.Setenv("TASKLOOM_VERIFY_COMMAND", "go test -race ./...")
			}
			// The flags exist in every case, with defaults that must not
			// leak in when the user did not set them.
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			fs.Int("workers", 9, "")
			fs.String("model", "scripted:unset.json", "")
			fs.String("db", "postgres://unset@h/db", "")
			fs.Float64("threshold", 9, "")
			fs.Duration("verify-timeout", time.Hour, "")
			fs.StringSlice("verify-cmd", []string{"unset"}, "")
			var args []string
			if tt.flags {
				args = []string{"--workers", "4", "--model", "scripted:flag.json", "--db", "postgres://flag@h/db",
					"--threshold", "8", "--verify-timeout", "40m", "--verify-cmd", "gotestsum,./..."}
			}
			require.NoError(t, fs.Parse(args))

			cfg, err := Load(LoadOpts{RepoDir: dir, Flags: fs, FlagKeys: map[string]string{
				"workers": "parallel_workers", "model": "model", "db": "database.url",
				"threshold": "task_size_limits.complexity_threshold", "verify-timeout": "verify.timeout",
				"verify-cmd": "verify.command", "not-defined-here": "max_attempts",
			}})
			require.NoError(t, err)
			got := layered{cfg.ParallelWorkers, cfg.Model, cfg.Database.URL, cfg.TaskSizeLimits.ComplexityThreshold,
				cfg.Verify.Timeout.Duration, cfg.Verify.Command}
			require.Equal(t, tt.want, got)

			// Keys no layer sets keep their defaults, including the
			// siblings of nested keys a layer does set.
			want := Default()
			require.Equal(t, want.TaskSizeLimits.MaxFilesToCreate, cfg.TaskSizeLimits.MaxFilesToCreate)
			require.Equal(t, want.MaxAttempts, cfg.MaxAttempts)
			require.Equal(t, want.Agent, cfg.Agent)
		})
	}
}

func TestDatabaseEnvNames(t *testing.T) {
	tests := []struct {
		name        string
		db, longEnv string
		want        string
	}{
		{name: "TASKLOOM_DATABASE_URL", longEnv: "postgres://long@h/db", want: "postgres://long@h/db"},
		{name: "TASKLOOM_DB", db: "postgres://short@h/db", want: "postgres://short@h/db"},
		{name: "TASKLOOM_DB wins", db: "postgres://short@h/db", longEnv: "postgres://long@h/db", want: "postgres://short@h/db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			t.Setenv("TASKLOOM_DB", tt.db)
			t.Setenv("TASKLOOM_DATABASE_URL", tt.longEnv)
			cfg, err := Load(LoadOpts{RepoDir: t.TempDir()})
			require.NoError(t, err)
			require.Equal(t, tt.want, cfg.Database.URL)
		})
	}
}

func TestEnvNestedAndTyped(t *testing.T) {
	clearEnv(t)
	t.Setenv("TASKLOOM_MAX_ATTEMPTS", "5")
	t.Setenv("TASKLOOM_WORKER_RALPH_ENABLED", "true")
	t.Setenv("TASKLOOM_INTEGRATIONS_LINEAR_TEAM_ID", "ENG")
	t.Setenv("TASKLOOM_AGENT_COMMAND_DENY", `["git push", "rm -rf /"]`)
	t.Setenv("TASKLOOM_AGENT_CONDENSE_THRESHOLD", "0.5")
	cfg, err := Load(LoadOpts{RepoDir: t.TempDir()})
	require.NoError(t, err)
	require.Equal(t, 5, cfg.MaxAttempts)
	require.True(t, cfg.Worker.Ralph.Enabled)
	require.Equal(t, "ENG", cfg.Integrations.Linear.TeamID)
	require.Equal(t, []string{"git push", "rm -rf /"}, cfg.Agent.CommandDeny)
	require.InDelta(t, 0.5, cfg.Agent.CondenseThreshold, 1e-9)
}

func TestFileExtensions(t *testing.T) {
	clearEnv(t)
	dir, _ := writeConfig(t, `{
		"worktree": {"include": [".env", "config/*.local"]},
		"agent": {"custom_modes": [{"slug": "docs", "name": "Docs", "role": "You write docs.", "groups": ["read", "edit"], "file_regex": "\\.md$"}]},
		"worker": {"mode": "docs"},
		"planner": {"keywords": {"data": ["sql", "schema"], "ui": ["button"]}}
	}`)
	cfg, err := Load(LoadOpts{RepoDir: dir})
	require.NoError(t, err)
	require.Equal(t, []string{".env", "config/*.local"}, cfg.Worktree.Include)
	require.Equal(t, []Mode{{Slug: "docs", Name: "Docs", Role: "You write docs.", Groups: []string{"read", "edit"}, FileRegex: `\.md$`}}, cfg.Agent.CustomModes)
	require.Equal(t, "docs", cfg.Worker.Mode)
	require.Equal(t, map[string][]string{"data": {"sql", "schema"}, "ui": {"button"}}, cfg.Planner.Keywords)
}

func TestLoadFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // with FILE for the file's path
	}{
		{name: "unknown top-level key", content: `{"paralel_workers": 2}`,
			want: `unknown key "paralel_workers" in FILE (did you mean parallel_workers?)`},
		{name: "unknown nested key", content: `{"task_size_limits": {"max_file_to_create": 3}}`,
			want: `unknown key "task_size_limits.max_file_to_create" in FILE (did you mean task_size_limits.max_files_to_create?)`},
		{name: "unknown deep key", content: `{"worker": {"ralph": {"enabeld": true}}}`,
			want: `unknown key "worker.ralph.enabeld" in FILE (did you mean worker.ralph.enabled?)`},
		{name: "unknown key in a list of objects", content: `{"agent": {"custom_modes": [{"slug": "x", "nmae": "X"}]}}`,
			want: `unknown key "agent.custom_modes[0].nmae" in FILE (did you mean agent.custom_modes[0].name?)`},
		{name: "key at the wrong depth", content: `{"max_files_to_create": 3}`,
			want: `unknown key "max_files_to_create" in FILE (did you mean task_size_limits.max_files_to_create?)`},
		{name: "unknown key without suggestion", content: `{"zzqqxxyy": 1}`,
			want: `unknown key "zzqqxxyy" in FILE`},
		{name: "two problems", content: `{"paralel_workers": 2, "max_attempts": "3"}`,
			want: `max_attempts: must be an integer, got "3" (from FILE); unknown key "paralel_workers" in FILE (did you mean parallel_workers?)`},
		{name: "string for int", content: `{"parallel_workers": "3"}`,
			want: `parallel_workers: must be an integer, got "3" (from FILE)`},
		{name: "fraction for int", content: `{"parallel_workers": 2.5}`,
			want: `parallel_workers: must be an integer, got 2.5 (from FILE)`},
		{name: "string for number", content: `{"task_size_limits": {"complexity_threshold": "5"}}`,
			want: `task_size_limits.complexity_threshold: must be a number, got "5" (from FILE)`},
		{name: "string for bool", content: `{"task_size_limits": {"auto_split": "yes"}}`,
			want: `task_size_limits.auto_split: must be true or false, got "yes" (from FILE)`},
		{name: "number for string", content: `{"model": 4}`,
			want: `model: must be a string, got 4 (from FILE)`},
		{name: "bad duration", content: `{"verify": {"timeout": "10 minutes"}}`,
			want: `verify.timeout: must be a duration like "10m" or "1h30m", got "10 minutes" (from FILE)`},
		{name: "number for duration", content: `{"verify": {"timeout": 600}}`,
			want: `verify.timeout: must be a duration string like "10m" or "1h30m", got 600 (from FILE)`},
		{name: "string for list", content: `{"verify": {"command": "go test"}}`,
			want: `verify.command: must be an array, got "go test" (from FILE)`},
		{name: "bad list element", content: `{"verify": {"command": ["go", 1]}}`,
			want: `verify.command[1]: must be a string, got 1 (from FILE)`},
		{name: "null object", content: `{"database": null}`,
			want: `database: must be an object, got null (from FILE)`},
		{name: "bad map value", content: `{"planner": {"keywords": {"data": "sql"}}}`,
			want: `planner.keywords.data: must be an array, got "sql" (from FILE)`},
		{name: "not an object", content: `[1, 2]`,
			want: `(top level): must be a JSON object, got an array (from FILE)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			dir, file := writeConfig(t, tt.content)
			_, err := Load(LoadOpts{RepoDir: dir})
			require.Error(t, err)
			require.Equal(t, strings.ReplaceAll(tt.want, "FILE", file), err.Error())
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
		})
	}
}

// A file as editors write it: with a byte order mark, read; with a key
// written twice, refused, naming it; --config naming no file, said so.
func TestLoadFileAsWritten(t *testing.T) {
	clearEnv(t)
	dir, _ := writeConfig(t, "\xef\xbb\xbf{\"parallel_workers\": 3}")
	cfg, err := Load(LoadOpts{RepoDir: dir})
	require.NoError(t, err)
	require.Equal(t, 3, cfg.ParallelWorkers)

	dir, file := writeConfig(t, `{"parallel_workers": 3, "verify": {"timeout": "1m", "command": ["true"], "timeout": "2m"}}`)
	_, err = Load(LoadOpts{RepoDir: dir})
	require.EqualError(t, err, file+": verify.timeout is written twice; keep one")
	dir, file = writeConfig(t, `{"agent": {"custom_modes": [{"slug": "x", "slug": "y"}]}}`)
	_, err = Load(LoadOpts{RepoDir: dir})
	require.EqualError(t, err, file+": agent.custom_modes[0].slug is written twice; keep one")

	missing := filepath.Join(t.TempDir(), "nope.json")
	_, err = Load(LoadOpts{ConfigFile: missing})
	require.EqualError(t, err, "config file "+missing+" does not exist: fix --config, or leave it out to read .project-config.json in the repo")
}

func TestCredentialKeys(t *testing.T) {
	for name, content := range map[string]string{
		"api_key":      `{"api_key": "sk-ant-secret"}`,
		"camel case":   `{"anthropicApiKey": "sk-ant-secret"}`,
		"nested":       `{"integrations": {"linear": {"api_key": "lin-secret"}}}`,
		"password":     `{"database": {"password": "secret"}}`,
		"token suffix": `{"openai_token": "secret"}`,
	} {
		// The subtest's name, unlike its content, may appear in the temp
		// dir's path and so in the error.
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			dir, _ := writeConfig(t, content)
			_, err := Load(LoadOpts{RepoDir: dir})
			var uk *UnknownKeyError
			require.ErrorAs(t, err, &uk)
			require.True(t, uk.Credential)
			require.Contains(t, err.Error(), "ANTHROPIC_API_KEY")
			require.Contains(t, err.Error(), "OPENAI_API_KEY")
			require.NotContains(t, err.Error(), "secret\"")
			require.NotContains(t, err.Error(), "sk-ant")
		})
	}
}

func TestMalformedJSON(t *testing.T) {
	tests := []struct {
		name       string
		content    string
		line, col  int
		wantSuffix string
	}{
		{name: "trailing comma", content: "{\n  \"parallel_workers\": 2,\n}\n", line: 3, col: 1,
			wantSuffix: "malformed JSON: invalid character '}' looking for beginning of object key string"},
		{name: "missing comma", content: "{\n  \"parallel_workers\": 2\n  \"max_attempts\": 3\n}", line: 3, col: 3,
			wantSuffix: "malformed JSON: invalid character '\"' after object key:value pair"},
		{name: "truncated", content: `{"model": `, line: 1, col: 11,
			wantSuffix: "malformed JSON: unexpected end of JSON input"},
		{name: "empty", content: "", line: 1, col: 1,
			wantSuffix: "malformed JSON: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			dir, file := writeConfig(t, tt.content)
			_, err := Load(LoadOpts{RepoDir: dir})
			var se *SyntaxError
			require.ErrorAs(t, err, &se)
			require.Equal(t, file, se.File)
			require.Equal(t, tt.line, se.Line, "line")
			require.Equal(t, tt.col, se.Column, "column")
			require.True(t, strings.HasPrefix(err.Error(), file+":"), "got %q", err)
			require.True(t, strings.HasSuffix(err.Error(), tt.wantSuffix), "got %q", err)
		})
	}
}

func TestEnvAndFlagErrors(t *testing.T) {
	t.Run("env", func(t *testing.T) {
		clearEnv(t)
		t.Setenv("TASKLOOM_PARALLEL_WORKERS", "many")
		t.Setenv("TASKLOOM_VERIFY_TIMEOUT", "ten")
		_, err := Load(LoadOpts{RepoDir: t.TempDir()})
		require.EqualError(t, err, `parallel_workers: must be an integer, got "many" (from TASKLOOM_PARALLEL_WORKERS); `+
			`verify.timeout: must be a duration like "10m" or "1h30m", got "ten" (from TASKLOOM_VERIFY_TIMEOUT)`)
	})
	t.Run("string flag for an int key", func(t *testing.T) {
		clearEnv(t)
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		fs.String("workers", "", "")
		require.NoError(t, fs.Parse([]string{"--workers=two"}))
		_, err := Load(LoadOpts{RepoDir: t.TempDir(), Flags: fs, FlagKeys: map[string]string{"workers": "parallel_workers"}})
		require.EqualError(t, err, `parallel_workers: must be an integer, got "two" (from --workers)`)
	})
	t.Run("flag mapped to an unknown key", func(t *testing.T) {
		clearEnv(t)
		_, err := Load(LoadOpts{RepoDir: t.TempDir(), FlagKeys: map[string]string{"workers": "paralel_workers"}})
		require.EqualError(t, err, `flag --workers maps to "paralel_workers", which is not a key a flag can set`)
	})
}

func TestLoadValidationSources(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		env   map[string]string
		flags []string
		want  string
	}{
		{name: "file", file: `{"parallel_workers": -1}`,
			want: `parallel_workers: must be at least 0, got -1 (from FILE)`},
		{name: "env", env: map[string]string{"TASKLOOM_PARALLEL_WORKERS": "-1"},
			want: `parallel_workers: must be at least 0, got -1 (from TASKLOOM_PARALLEL_WORKERS)`},
		{name: "flag", flags: []string{"--workers=-1"},
			want: `parallel_workers: must be at least 0, got -1 (from --workers)`},
		{name: "nested file", file: `{"task_size_limits": {"complexity_threshold": 20}}`,
			want: `task_size_limits.complexity_threshold: must be between 0 and 13, got 20 (from FILE)`},
		{name: "list element", file: `{"agent": {"custom_modes": [{"slug": "Bad Slug", "name": "x"}]}}`,
			want: `agent.custom_modes[0].slug: must be lowercase letters, digits and "-", got "Bad Slug" (from FILE)`},
		{name: "cross-key rule without source", file: `{"integrations": {"linear": {"enabled": true}}}`,
			want: `integrations.linear.team_id: must be set when integrations.linear.enabled is true`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			dir, file := t.TempDir(), ""
			if tt.file != "" {
				dir, file = writeConfig(t, tt.file)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			fs.Int("workers", 1, "")
			require.NoError(t, fs.Parse(tt.flags))
			_, err := Load(LoadOpts{RepoDir: dir, Flags: fs, FlagKeys: map[string]string{"workers": "parallel_workers"}})
			require.EqualError(t, err, strings.ReplaceAll(tt.want, "FILE", file))
			var ke *KeyError
			require.ErrorAs(t, err, &ke)
		})
	}
}

func TestConfigFileOption(t *testing.T) {
	clearEnv(t)
	repo, _ := writeConfig(t, `{"parallel_workers": 2}`)
	other := filepath.Join(t.TempDir(), "other.json")
	require.NoError(t, os.WriteFile(other, []byte(`{"parallel_workers": 3}`), 0o644))

	cfg, err := Load(LoadOpts{RepoDir: repo})
	require.NoError(t, err)
	require.Equal(t, 2, cfg.ParallelWorkers)

	cfg, err = Load(LoadOpts{RepoDir: repo, ConfigFile: other})
	require.NoError(t, err)
	require.Equal(t, 3, cfg.ParallelWorkers, "--config replaces the repo's file")

	_, err = Load(LoadOpts{RepoDir: repo, ConfigFile: filepath.Join(t.TempDir(), "missing.json")})
	require.ErrorIs(t, err, os.ErrNotExist, "an explicit config file must exist")

	cfg, err = Load(LoadOpts{RepoDir: t.TempDir()})
	require.NoError(t, err, "a repo without a config file uses the defaults")
	require.Equal(t, Default(), cfg)
}

func TestLoadErrorTypes(t *testing.T) {
	clearEnv(t)
	dir, _ := writeConfig(t, `{"paralel_workers": 2}`)
	_, err := Load(LoadOpts{RepoDir: dir})
	var uk *UnknownKeyError
	require.ErrorAs(t, err, &uk)
	require.Equal(t, "paralel_workers", uk.Key)
	require.Equal(t, "parallel_workers", uk.Suggestion)
	require.False(t, errors.Is(err, os.ErrNotExist))
}

// Environment variable names are case-sensitive: an MCP server's env keeps
// the names as the file writes them, although viper lowercases map keys.
func TestMCPServerEnvKeepsCase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, FileName)
	require.NoError(t, os.WriteFile(file, []byte(`{"mcp": {"servers": [
		{"name": "fs", "command": ["mcp-server-filesystem", "/tmp"], "env": {"My_Token": "a", "DEBUG": "1"}},
		{"name": "web", "url": "http://127.0.0.1:8080/mcp"}]}}`), 0o644))
	cfg, err := Load(LoadOpts{RepoDir: dir})
	require.NoError(t, err)
	require.Equal(t, []MCPServer{
		{Name: "fs", Command: []string{"mcp-server-filesystem", "/tmp"}, Env: map[string]string{"My_Token": "a", "DEBUG": "1"}},
		{Name: "web", URL: "http://127.0.0.1:8080/mcp"},
	}, cfg.MCP.Servers)
}
