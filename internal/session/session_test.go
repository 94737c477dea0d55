package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/agent"
	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/internal/proc"
	"github.com/taskloom/taskloom/internal/testkit"
	"github.com/taskloom/taskloom/planner"
	"github.com/taskloom/taskloom/verify"
)

func TestLoadConfig(t *testing.T) {
	for _, name := range []string{"TASKLOOM_MODEL", "TASKLOOM_PARALLEL_WORKERS", "TASKLOOM_DB", "TASKLOOM_DATABASE_URL"} {
		t.Setenv(name, "")
	}
	repo := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(repo, config.FileName),
		[]byte(`{"parallel_workers": 2, "model": "openai:gpt-4o"}`), 0o644))
	other := filepath.Join(t.TempDir(), "other.json")
	require.NoError(t, os.WriteFile(other, []byte(`{"max_attempts": 5}`), 0o644))

	tests := []struct {
		name        string
		args        []string
		configFile  string
		wantWorkers int
		wantModel   string
		wantDB      string
		wantAttempt int
	}{
		{name: "repo file", wantWorkers: 2, wantModel: "openai:gpt-4o", wantAttempt: 3},
		{name: "flags beat the file", args: []string{"--workers", "4", "--model", "scripted:s.json", "--db", "postgres://u@h/db"},
			wantWorkers: 4, wantModel: "scripted:s.json", wantDB: "postgres://u@h/db", wantAttempt: 3},
		{name: "--config replaces the repo file", args: []string{"--config", other},
			wantWorkers: 1, wantModel: "anthropic:claude-sonnet-4-5", wantAttempt: 5},
		{name: "configFile argument", configFile: other,
			wantWorkers: 1, wantModel: "anthropic:claude-sonnet-4-5", wantAttempt: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "run", RunE: func(*cobra.Command, []string) error { return nil }}
			cmd.Flags().Int("workers", 1, "")
			cmd.Flags().String("model", "", "")
			cmd.Flags().String("db", "", "")
			cmd.Flags().String("config", "", "")
			require.NoError(t, cmd.ParseFlags(tt.args))

			cfg, err := LoadConfig(cmd.Flags(), repo, tt.configFile)
			require.NoError(t, err)
			require.Equal(t, tt.wantWorkers, cfg.ParallelWorkers, "parallel_workers")
			require.Equal(t, tt.wantModel, cfg.Model, "model")
			require.Equal(t, tt.wantDB, cfg.Database.URL, "database.url")
			require.Equal(t, tt.wantAttempt, cfg.MaxAttempts, "max_attempts")
		})
	}

	t.Run("command without the flags", func(t *testing.T) {
		cmd := &cobra.Command{Use: "resume"}
		cfg, err := LoadConfig(cmd.Flags(), repo, "")
		require.NoError(t, err)
		require.Equal(t, 2, cfg.ParallelWorkers)
	})

	t.Run("bad flag value names the flag", func(t *testing.T) {
		cmd := &cobra.Command{Use: "run"}
		cmd.Flags().Int("workers", 1, "")
		require.NoError(t, cmd.ParseFlags([]string{"--workers", "-1"}))
		_, err := LoadConfig(cmd.Flags(), repo, "")
		require.EqualError(t, err, "parallel_workers: must be at least 0, got -1 (from --workers)")
	})
}

// TestDefaultLimitsAgree: the config file's default task size limits and
// the planner's own defaults are written in two packages, which import
// neither the other; this keeps them from drifting apart.
func TestDefaultLimitsAgree(t *testing.T) {
	require.Equal(t, planner.DefaultLimits(), PlannerLimits(config.Default()))
	// The config's bound on the complexity threshold is the planner's
	// highest score.
	cfg := config.Default()
	cfg.TaskSizeLimits.ComplexityThreshold = planner.MaxTotal
	require.NoError(t, cfg.Validate())
	cfg.TaskSizeLimits.ComplexityThreshold = planner.MaxTotal + 0.5
	require.Error(t, cfg.Validate())
}

// The repo's store is kept out of git before it is made: a run refused at
// once (uncommitted changes, say) leaves no untracked .taskloom/ behind for
// a later git add -A.
func TestOpenKeepsTheStoreOutOfGit(t *testing.T) {
	repo := t.TempDir()
	testkit.Git(t, repo, "init", "-q")
	s, err := Open(t.Context(), Opts{Repo: repo, Flags: pflag.NewFlagSet("run", pflag.ContinueOnError)})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.FileExists(t, DefaultDBURL(repo))
	require.Empty(t, testkit.Git(t, repo, "status", "--porcelain", "--untracked-files=all"))
}

// The Ralph loop's check of a try is verify_task's: a test command that
// passes is not enough while the task's files are missing.
func TestRalphTestsCheckTheTasksFiles(t *testing.T) {
	dir := t.TempDir()
	check := ralphTests([]string{"true"}, &verify.Opts{})
	job := agent.Job{Worktree: dir, Task: planner.Task{ID: "T1", FilesToCreate: []string{"sub.go"}, TestFiles: []string{"check.sh"}}}
	passed, out, err := check(t.Context(), job)
	require.NoError(t, err)
	require.False(t, passed)
	require.Contains(t, out, "missing files (files_to_create, test_files): sub.go, check.sh")
	testkit.WriteFiles(t, dir, map[string]string{"sub.go": "x", "check.sh": "y"})
	passed, _, err = check(t.Context(), job)
	require.NoError(t, err)
	require.True(t, passed)
}

// From a folder inside the repo, commands use the repo's top, as git does;
// a folder with its own config keeps it, and one outside a repo is itself.
func TestRepoDir(t *testing.T) {
	ctx := context.Background()
	repo := testkit.Repo(t, map[string]string{"docs/a.md": "a\n", "svc/.project-config.json": "{}\n"})
	require.Equal(t, repo, RepoDir(ctx, filepath.Join(repo, "docs")))
	require.Equal(t, repo, RepoDir(ctx, repo))
	require.Equal(t, filepath.Join(repo, "svc"), RepoDir(ctx, filepath.Join(repo, "svc")))
	outside := t.TempDir()
	require.Equal(t, outside, RepoDir(ctx, outside))
}

// The credentials the config holds are secrets an attempt's commit may not
// hold, as the environment's are: a worker can read the config file.
func TestConfigSecretsAreNeverCommitted(t *testing.T) {
	t.Parallel()
	var cfg config.Config
	cfg.Database.URL = "postgres://app:Sup3rS3cretPW@db.example:5432/prod"
	cfg.MCP.Servers = []config.MCPServer{{Name: "issues", Command: []string{"srv"}, Env: map[string]string{"ISSUES_TOKEN": "tok-0123456789"}},
		{Name: "docs", URL: "https://docs.example/mcp?token=url-0123456789"}}
	r := proc.NewRedactor(configSecrets(cfg, "postgres://u:fl4g-0123456@127.0.0.1/x"), nil)
	patch := "+const dsn = \"postgres://app:Sup3rS3cretPW@db.example:5432/prod\"\n+tok-0123456789\n+url-0123456789\n+fl4g-0123456\n"
	require.ElementsMatch(t, []string{"database.url (its password)", "mcp.servers issues env ISSUES_TOKEN", "mcp.servers docs url (its token)"}, r.Find([]byte(patch)))
}

// A lease that lapsed because the store stopped answering names the store,
// and how to go on; one another process took names that process.
func TestStoreFaultOfALapsedLease(t *testing.T) {
	t.Parallel()
	down := &graph.LeaseLostError{ThreadID: "r1", Err: errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")}
	require.EqualError(t, StoreFault("r1", " --db X", fmt.Errorf("run: %w", down)),
		"run r1 stopped: its store did not answer for as long as its lease lasts (dial tcp 127.0.0.1:5432: connect: connection refused); resume it when the store is back: taskloom resume r1 --db X")
	released := &graph.LeaseLostError{ThreadID: "r1", Err: checkpoint.ErrLeaseLost}
	require.EqualError(t, StoreFault("r1", "", released), "run r1 stopped: it lost its lease on the store (it lapsed before it could be renewed); resume it with: taskloom resume r1")
	taken := &graph.LeaseLostError{ThreadID: "r1", Holder: "pid 7, host h"}
	require.EqualError(t, StoreFault("r1", "", taken), "run r1 stopped: it lost its lease on the store: another process (pid 7, host h) took the run over")
}
