package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/migrations"
	"github.com/taskloom/taskloom/worktree"
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
		if _, err := worktree.FindRoot(ctx, repo); err == nil {
			if err := worktree.ExcludeTaskloom(ctx, repo); err != nil {
				return nil, err
			}
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
