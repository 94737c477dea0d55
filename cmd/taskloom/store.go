package main

import (
	"context"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/store"
	"github.com/taskloom/taskloom/store/postgres"
	"github.com/taskloom/taskloom/store/sqlite"
)

// storeOpts configures openStore. Nil means defaults.
type storeOpts struct {
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

// openStore opens the store that dbURL names and migrates it: a
// postgres:// or postgresql:// URL is PostgreSQL; anything else is a SQLite
// database file, given as a path, sqlite://PATH, sqlite:PATH or file:PATH.
// This is the one place where the command picks a driver. Errors name the
// URL with its password masked.
func openStore(ctx context.Context, dbURL string, opts *storeOpts) (store.Driver, error) {
	if opts == nil {
		opts = &storeOpts{}
	}
	if postgres.IsURL(dbURL) {
		return postgres.Open(ctx, dbURL, &postgres.Opts{SkipMigrate: opts.SkipMigrate || opts.ReadOnly, Retry: opts.Retry})
	}
	return sqlite.Open(ctx, sqlite.Path(dbURL), &sqlite.Opts{SkipMigrate: opts.SkipMigrate})
}
