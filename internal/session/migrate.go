package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/migrations"
)

// Migrate opens the store at dbURL as it is and applies its migrations;
// an empty dbURL is the SQLite store of repo, which is made (and kept out
// of git) if need be.
func Migrate(ctx context.Context, dbURL, repo string) (*migrations.Result, error) {
	if dbURL == "" {
		dbURL = DefaultDBURL(repo)
		if err := os.MkdirAll(filepath.Dir(dbURL), 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", filepath.Dir(dbURL), err)
		}
		if err := excludeFromGit(repo, ".taskloom/"); err != nil {
			return nil, err
		}
	}
	s, err := OpenStore(ctx, dbURL, &StoreOpts{SkipMigrate: true})
	if err != nil {
		return nil, fmt.Errorf("cannot open the database: %w; check --db and that the database is reachable", err)
	}
	defer func() { _ = s.Close() }()
	res, err := s.Migrate(ctx)
	if err != nil {
		return res, fmt.Errorf("migrate %s: %w", checkpoint.MaskURL(dbURL), err)
	}
	return res, nil
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
