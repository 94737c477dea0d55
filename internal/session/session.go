// Package session is what the commands that touch runs share: a repo's
// config, the store that holds its runs, and the pipeline and runner built
// from them. It is the one place that picks a store driver, so graph/ and
// nodes/ stay free of them.
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/integrations/linear"
	"github.com/taskloom/taskloom/internal/clip"
	"github.com/taskloom/taskloom/internal/mcpclient"
	"github.com/taskloom/taskloom/llm"
	"github.com/taskloom/taskloom/nodes"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/sqlite"
	"github.com/taskloom/taskloom/worktree"
)

// Session is a repo's config and its open store.
type Session struct {
	Cfg    config.Config
	Repo   string
	DBURL  string
	Saver  checkpoint.Saver
	Store  *nodes.Store
	Logger *slog.Logger
	// flags are the command's, for the config of a run made in another repo.
	flags  *pflag.FlagSet
	stderr io.Writer
	// mcp is the client of the config's MCP servers, started with the
	// first agent and closed with the session.
	mcp *mcpclient.Client
	// linear mirrors the driven runs' tasks to Linear when the config
	// says so; closed with the session.
	linear     *linear.Syncer
	linearOnce sync.Once
	// waits hears of every wait for the model provider, once the
	// progress display is there to show it.
	waits atomic.Pointer[func(llm.WaitInfo)]
}

// Opts says which session Open opens.
type Opts struct {
	// Repo is the repo's folder; ConfigFile, when set, replaces its
	// .project-config.json.
	Repo, ConfigFile string
	// Flags are the command's: --model, --workers, --db and --config
	// override the config when the user set them.
	Flags *pflag.FlagSet
	// ReadOnly never creates a store or a .taskloom folder (a repo
	// without one has no runs: ErrNoStore), and with a --db it needs no
	// git repo.
	ReadOnly bool
	// Existing is for the commands that work on a run already there
	// (resume, review, replan): they never create the repo's embedded
	// store either, since a repo without one has no runs (ErrNoStore).
	Existing bool
	// AwaitStore, with Existing, waits for a run to create the store
	// rather than stop with ErrNoStore, saying so once on Stderr: a
	// worker may start before the first run.
	AwaitStore bool
	// Stderr hears, once per outage, that the store is being waited for.
	Stderr io.Writer
}

// ErrNoStore says that a read-only command found no store to read: the
// repo has had no run yet.
var ErrNoStore = errors.New("no taskloom runs yet")

// DefaultDBURL is the embedded store of a repo.
func DefaultDBURL(repo string) string {
	return filepath.Join(repo, ".taskloom", "taskloom.db")
}

// FlagKeys maps the flags that run, resume and plan share to config keys.
// A command that lacks one of these flags simply does not override that
// key.
var FlagKeys = map[string]string{
	"model":   "model",
	"workers": "parallel_workers",
	"db":      "database.url",
}

// LoadOpts are the config.LoadOpts of the repo at repoDir with the
// documented precedence: flags (--model, --workers, --db) when the user set
// them, then TASKLOOM_* variables, then the config file, then the
// defaults. The file is configFile when set, else the value of --config
// when set, else repoDir's .project-config.json.
func LoadOpts(flags *pflag.FlagSet, repoDir, configFile string) config.LoadOpts {
	if configFile == "" {
		if f := flags.Lookup("config"); f != nil && f.Changed {
			configFile = f.Value.String()
		}
	}
	return config.LoadOpts{RepoDir: repoDir, ConfigFile: configFile, Flags: flags, FlagKeys: FlagKeys}
}

// LoadConfig loads the config that LoadOpts describes.
func LoadConfig(flags *pflag.FlagSet, repoDir, configFile string) (config.Config, error) {
	return config.Load(LoadOpts(flags, repoDir, configFile))
}

// StoreOpts configures OpenStore. Nil means defaults.
type StoreOpts struct {
	// SkipMigrate opens the database as it is.
	SkipMigrate bool
	// ReadOnly is for the commands that only read: they never create
	// tables in a database that has none, and say that it has no runs
	// (store.ErrNoSchema). A SQLite file is taskloom's own, made by a run:
	// it is migrated as usual.
	ReadOnly bool
	// Retry says how a PostgreSQL store rides out an outage.
	Retry *checkpoint.RetryOpts
}

// OpenStore opens the store that dbURL names and migrates it: a
// postgres:// or postgresql:// URL is PostgreSQL; anything else is a SQLite
// database file, given as a path, sqlite://PATH, sqlite:PATH or file:PATH.
// Errors name the URL with its password masked.
func OpenStore(ctx context.Context, dbURL string, opts *StoreOpts) (store.Driver, error) {
	if opts == nil {
		opts = &StoreOpts{}
	}
	if postgres.IsURL(dbURL) {
		return postgres.Open(ctx, dbURL, &postgres.Opts{SkipMigrate: opts.SkipMigrate || opts.ReadOnly, Retry: opts.Retry})
	}
	return sqlite.Open(ctx, sqlite.Path(dbURL), &sqlite.Opts{SkipMigrate: opts.SkipMigrate})
}

// RepoDir returns the top of the git repository that holds dir, absolute,
// or dir when it is in none: from a folder inside the repo, as git itself
// works from one, the repo's config, store and remotes are its top's. A
// folder that has a config or a store of its own keeps them.
func RepoDir(ctx context.Context, dir string) string {
	for _, own := range []string{config.FileName, ".taskloom"} {
		if _, err := os.Stat(filepath.Join(dir, own)); err == nil {
			return dir
		}
	}
	if root, err := worktree.FindRoot(ctx, dir); err == nil {
		if real, err := filepath.EvalSymlinks(dir); err == nil && real != root {
			return root
		}
	}
	return dir
}

// Open loads the repo's config and opens its store, creating the repo's
// embedded store when it has none (unless ReadOnly). The repo must be a
// git repo, except for a read-only session, or one on an existing run, on
// a --db.
func Open(ctx context.Context, o Opts) (*Session, error) {
	repo, err := filepath.Abs(o.Repo)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(repo); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("repo %s is not a directory; pass --repo DIR", o.Repo)
	}
	repo = RepoDir(ctx, repo)
	cfg, err := LoadConfig(o.Flags, repo, o.ConfigFile)
	if err != nil {
		return nil, err
	}
	s := &Session{Cfg: cfg, Repo: repo, DBURL: cfg.Database.URL, Logger: slog.New(slog.DiscardHandler), flags: o.Flags, stderr: o.Stderr}
	if s.stderr == nil {
		s.stderr = io.Discard
	}
	// A command on a run already in a store it was given finds the run's
	// repo in the run's record: it works from anywhere, as the commands
	// printed for the user to paste must.
	if s.DBURL == "" || !(o.ReadOnly || o.Existing) {
		if _, err := worktree.FindRoot(ctx, repo); errors.Is(err, worktree.ErrNotRepo) {
			return nil, fmt.Errorf("%s is not inside a git repository: cd into your repo or pass --repo", repo)
		} else if err != nil {
			return nil, err
		}
	}
	if s.DBURL == "" {
		s.DBURL = DefaultDBURL(repo)
		_, err := os.Stat(s.DBURL)
		switch {
		case errors.Is(err, os.ErrNotExist) && o.Existing:
			return nil, fmt.Errorf("%w in %s: start one with taskloom run PRODUCT.md, or pass the --db of the store that holds the run", ErrNoStore, repo)
		case errors.Is(err, os.ErrNotExist) && o.ReadOnly:
			return nil, fmt.Errorf("%w in %s: start one with taskloom run PRODUCT.md", ErrNoStore, repo)
		case !o.ReadOnly:
			// The store is kept out of git before it exists, so that a
			// run refused at once leaves nothing for git add -A.
			if err := worktree.ExcludeTaskloom(ctx, repo); err != nil {
				return nil, err
			}
			if err := os.MkdirAll(filepath.Dir(s.DBURL), 0o755); err != nil {
				return nil, err
			}
		}
	}
	if (o.Existing && !o.ReadOnly) || (o.ReadOnly && !IsPostgresURL(s.DBURL)) {
		// Nor does a command on runs already there (a worker, a resume):
		// a mistyped --db must not get taskloom's tables, and there are
		// no runs to find in it. A worker started before the first run
		// waits for the run to make the store. (A read-only open of
		// PostgreSQL makes no tables; of SQLite, it would.)
		if err := awaitSchema(ctx, s.DBURL, o, StoreRetry(cfg, o.Stderr)); err != nil {
			return nil, err
		}
	}
	// A read-only command never creates tables in a database that has
	// none: it says that there are no runs there.
	d, err := OpenStore(ctx, s.DBURL, &StoreOpts{Retry: StoreRetry(cfg, o.Stderr), ReadOnly: o.ReadOnly})
	if err != nil {
		return nil, err
	}
	s.Saver = d
	if s.Store, err = nodes.NewStore(d); err != nil {
		_ = d.Close()
		return nil, err
	}
	if o.ReadOnly {
		if _, err := s.Store.Runs(ctx); errors.Is(err, store.ErrNoSchema) {
			_ = s.Close()
			return nil, fmt.Errorf("%w in %s: start one with taskloom run PRODUCT.md --db URL", ErrNoStore, config.RedactURL(s.DBURL))
		}
	}
	return s, nil
}

// awaitSchema returns hasSchema's answer, or with o.AwaitStore waits
// until the store has its tables or ctx ends.
func awaitSchema(ctx context.Context, dbURL string, o Opts, retry *checkpoint.RetryOpts) error {
	if !IsPostgresURL(dbURL) {
		// A SQLite file that is not there holds no runs; opening it
		// would create it.
		if _, err := os.Stat(sqlite.Path(dbURL)); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: there is no file %s; pass the --db of the store that holds the runs", ErrNoStore, dbURL)
		}
	}
	said := false
	for {
		err := hasSchema(ctx, dbURL, retry)
		if !o.AwaitStore || !errors.Is(err, ErrNoStore) {
			return err
		}
		if !said && o.Stderr != nil {
			fmt.Fprintf(o.Stderr, "taskloom: no taskloom store in %s yet; waiting for a run to make one (taskloom run PRODUCT.md --db URL)\n", config.RedactURL(dbURL))
			said = true
		}
		t := time.NewTimer(storePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// storePoll is how often a worker waiting for the store looks again.
const storePoll = 2 * time.Second

// hasSchema returns ErrNoStore when the store at dbURL has no taskloom
// tables, opening it read-only to look.
func hasSchema(ctx context.Context, dbURL string, retry *checkpoint.RetryOpts) error {
	d, err := OpenStore(ctx, dbURL, &StoreOpts{Retry: retry, ReadOnly: true, SkipMigrate: true})
	if err != nil {
		return err
	}
	defer d.Close()
	st, err := nodes.NewStore(d)
	if err != nil {
		return err
	}
	if _, err := st.Runs(ctx); errors.Is(err, store.ErrNoSchema) {
		return fmt.Errorf("%w in %s: start one with taskloom run PRODUCT.md --db URL", ErrNoStore, config.RedactURL(dbURL))
	}
	return nil
}

// Close stops the Linear sync and the MCP servers, and closes the store.
func (s *Session) Close() error {
	_ = s.linear.Close() // it never fails
	err := s.mcp.Close()
	if cerr := s.Store.Close(); err == nil {
		err = cerr
	}
	if cerr := s.Saver.Close(); err == nil {
		err = cerr
	}
	return err
}

// StoreRetry says how the store rides out an outage: retried for
// database.retry_for, and the run says once per outage, on stderr, that it
// waits.
func StoreRetry(cfg config.Config, stderr io.Writer) *checkpoint.RetryOpts {
	if stderr == nil {
		stderr = io.Discard
	}
	var mu sync.Mutex
	return &checkpoint.RetryOpts{
		For: cfg.Database.RetryFor.Duration,
		UnreachableFunc: func(err error, retryFor time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(stderr, "taskloom: store unreachable (%s); retrying for up to %s\n", clip.Line(err.Error(), 0), shortDuration(retryFor))
		},
	}
}

// shortDuration prints d without zero units: 2m, 1m30s, 2s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
