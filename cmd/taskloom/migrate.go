package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/taskloom/taskloom/graph/checkpoint"
)

// migrateOpts are the options of `taskloom migrate`.
type migrateOpts struct {
	// DB is the database URL: postgres://… or a SQLite path. Empty means
	// the SQLite database at <Repo>/.taskloom/taskloom.db.
	DB string
	// Repo is the repository whose default database is used. Empty means
	// the current directory.
	Repo string
}

// Validate implements the command options contract.
func (o *migrateOpts) Validate() error {
	if o.DB == "" && o.Repo == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("find the current directory: %w", err)
		}
		o.Repo = wd
	}
	return nil
}

// Run applies the migrations and reports each one it ran to w.
func (o *migrateOpts) Run(ctx context.Context, w io.Writer) error {
	dbURL := o.DB
	if dbURL == "" {
		p, err := defaultDBPath(o.Repo)
		if err != nil {
			return err
		}
		dbURL = p
	}
	s, err := openStore(ctx, dbURL, &storeOpts{SkipMigrate: true})
	if err != nil {
		return fmt.Errorf("cannot open the database: %w; check --db and that the database is reachable", err)
	}
	defer func() { _ = s.Close() }()
	res, err := s.Migrate(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", checkpoint.MaskURL(dbURL), err)
	}
	for _, v := range res.Versions {
		fmt.Fprintf(w, "applied %s\n", v.ID())
	}
	fmt.Fprintf(w, "schema is up to date at version %d\n", res.Version)
	return nil
}

// defaultDBPath creates <repo>/.taskloom (keeping it out of git when repo
// is a git checkout) and returns the SQLite database path in it.
func defaultDBPath(repo string) (string, error) {
	dir := filepath.Join(repo, ".taskloom")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	if err := excludeFromGit(repo, ".taskloom/"); err != nil {
		return "", err
	}
	return filepath.Join(dir, "taskloom.db"), nil
}

// excludeFromGit adds pattern to repo's .git/info/exclude unless it is
// there. It does nothing when repo has no .git directory.
func excludeFromGit(repo, pattern string) error {
	gitDir := filepath.Join(repo, ".git")
	if fi, err := os.Stat(gitDir); err != nil || !fi.IsDir() {
		return nil
	}
	path := filepath.Join(gitDir, "info", "exclude")
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	for _, line := range bytes.Split(old, []byte("\n")) {
		if string(bytes.TrimSpace(line)) == pattern {
			return nil
		}
	}
	if len(old) > 0 && !bytes.HasSuffix(old, []byte("\n")) {
		old = append(old, '\n')
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, append(old, pattern+"\n"...), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func newMigrateCmd(a *app) *cobra.Command {
	var (
		opts  migrateOpts
		dbURL string
	)
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the store's schema migrations",
		Long: "Apply the store's schema migrations. The store is --db, else TASKLOOM_DB, else\n" +
			"database.url of .project-config.json, else the SQLite database\n" +
			".taskloom/taskloom.db in the current directory.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wd, err := os.Getwd()
			if err != nil {
				return fmt.Errorf("find the current directory: %w", err)
			}
			// --db, then TASKLOOM_DB, then the config's database.url.
			cfg, err := loadConfig(cmd, wd, "")
			if err != nil {
				return err
			}
			opts.DB, opts.Repo = cfg.Database.URL, wd
			if err := opts.Validate(); err != nil {
				return err
			}
			return opts.Run(cmd.Context(), a.stdout)
		},
	}
	cmd.Flags().StringVar(&dbURL, "db", "", "database URL (postgres://… or a SQLite file path)")
	return cmd
}
