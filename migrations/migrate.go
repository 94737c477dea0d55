package migrations

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// VersionTable is the table that records the applied versions, one row each.
const VersionTable = "taskloom_migration"

// Direction says which way Migrate goes.
type Direction string

const (
	// Up applies migrations.
	Up Direction = "up"
	// Down reverts migrations.
	Down Direction = "down"
)

// ErrNewerSchema is matched by a *NewerSchemaError.
var ErrNewerSchema = errors.New("database schema is newer than this taskloom")

// NewerSchemaError reports a database migrated by a newer taskloom.
type NewerSchemaError struct {
	// Version is the database's schema version.
	Version int
	// Known is the newest version this binary knows.
	Known int
}

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("database schema is at version %d, newer than this taskloom (%d); upgrade taskloom", e.Version, e.Known)
}

// Is reports ErrNewerSchema.
func (e *NewerSchemaError) Is(target error) bool { return target == ErrNewerSchema }

// Opts configures a Migrator. The zero value, or nil, means defaults.
type Opts struct {
	// Logger receives one line per applied or reverted migration. Nil
	// discards them.
	Logger *slog.Logger
	// Migrations replaces the driver's set (for tests). It must be in
	// version order, numbered from 1 without gaps.
	Migrations []Migration
}

// MigrateOpts narrows what one Migrate call does. Nil means defaults: up to
// the newest version, or down by one version.
type MigrateOpts struct {
	// TargetVersion is the version to stop at. Zero means the default;
	// going down, -1 means all the way (to an empty schema).
	TargetVersion int
	// MaxSteps limits how many migrations run; zero means no limit.
	MaxSteps int
}

// AppliedVersion is one migration that Migrate ran.
type AppliedVersion struct {
	Version  int
	Name     string
	Duration time.Duration
}

// ID is the migration's file stem, for example "001_init".
func (v AppliedVersion) ID() string { return fmt.Sprintf("%03d_%s", v.Version, v.Name) }

// Result says what Migrate did.
type Result struct {
	Direction Direction
	// Versions are the migrations run, in the order they ran; empty when
	// the schema was already where it was asked to be.
	Versions []AppliedVersion
	// Version is the schema version afterwards.
	Version int
}

// Migrator applies a set of migrations to one database.
type Migrator struct {
	migrations []Migration
	logger     *slog.Logger
	newSession SessionFunc
}

// Session is one connection that a Migrate call works on. Each driver
// implements it in its own dialect.
type Session interface {
	// Lock serializes migrators on the database until Release: an
	// advisory lock where the database has one.
	Lock(ctx context.Context) error
	// EnsureTable creates VersionTable if it does not exist.
	EnsureTable(ctx context.Context) error
	// Version returns the highest version in VersionTable, 0 when empty.
	Version(ctx context.Context) (int, error)
	// Apply runs the migration's SQL for dir and records (up) or removes
	// (down) its version's row, in one transaction. It reports false,
	// having changed nothing, when the row already was in that state.
	Apply(ctx context.Context, m Migration, dir Direction) (bool, error)
	// Release gives the lock and the connection back.
	Release()
}

// SessionFunc opens a Session.
type SessionFunc func(ctx context.Context) (Session, error)

// New returns a migrator that applies set, a driver's migrations (or
// Opts.Migrations when given), through sessions from newSession.
func New(set []Migration, newSession SessionFunc, opts *Opts) (*Migrator, error) {
	if opts == nil {
		opts = &Opts{}
	}
	m := &Migrator{migrations: set, logger: opts.Logger, newSession: newSession}
	if opts.Migrations != nil {
		m.migrations = opts.Migrations
	}
	for i, mig := range m.migrations {
		if mig.Version != i+1 {
			return nil, fmt.Errorf("migrations must be numbered from 1 without gaps: position %d has version %d", i+1, mig.Version)
		}
	}
	if m.logger == nil {
		m.logger = slog.New(slog.DiscardHandler)
	}
	return m, nil
}

// Latest is the newest version the migrator knows.
func (m *Migrator) Latest() int { return len(m.migrations) }

// Version returns the database's schema version: 0 when it has none.
func (m *Migrator) Version(ctx context.Context) (int, error) {
	s, err := m.newSession(ctx)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer s.Release()
	if err := s.EnsureTable(ctx); err != nil {
		return 0, fmt.Errorf("create %s: %w", VersionTable, err)
	}
	return s.Version(ctx)
}

// Migrate applies (Up) or reverts (Down) migrations. It is idempotent:
// migrating up a database that is up to date does nothing. It fails with a
// *NewerSchemaError when the database is at a version the migrator does not
// know.
func (m *Migrator) Migrate(ctx context.Context, dir Direction, opts *MigrateOpts) (*Result, error) {
	if opts == nil {
		opts = &MigrateOpts{}
	}
	if dir != Up && dir != Down {
		return nil, fmt.Errorf("unknown migration direction %q", dir)
	}
	s, err := m.newSession(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer s.Release()
	if err := s.Lock(ctx); err != nil {
		return nil, fmt.Errorf("take migration lock: %w", err)
	}
	if err := s.EnsureTable(ctx); err != nil {
		return nil, fmt.Errorf("create %s: %w", VersionTable, err)
	}
	cur, err := s.Version(ctx)
	if err != nil {
		return nil, err
	}
	if cur > m.Latest() {
		return nil, &NewerSchemaError{Version: cur, Known: m.Latest()}
	}
	res := &Result{Direction: dir, Version: cur}
	var todo []Migration
	if dir == Up {
		target := m.Latest()
		if opts.TargetVersion > 0 {
			if opts.TargetVersion > m.Latest() {
				return nil, fmt.Errorf("target version %d is newer than the newest known (%d)", opts.TargetVersion, m.Latest())
			}
			target = opts.TargetVersion
		}
		for v := cur + 1; v <= target; v++ {
			todo = append(todo, m.migrations[v-1])
		}
	} else {
		target := cur - 1
		switch {
		case opts.TargetVersion < 0:
			target = 0
		case opts.TargetVersion > 0:
			target = opts.TargetVersion
		case opts.MaxSteps > 0:
			target = 0
		}
		for v := cur; v > target && v > 0; v-- {
			todo = append(todo, m.migrations[v-1])
		}
	}
	if opts.MaxSteps > 0 && len(todo) > opts.MaxSteps {
		todo = todo[:opts.MaxSteps]
	}
	for _, mig := range todo {
		start := time.Now()
		ran, err := s.Apply(ctx, mig, dir)
		if err != nil {
			return res, fmt.Errorf("apply migration %s (%s): %w", mig.ID(), dir, err)
		}
		if dir == Up {
			res.Version = mig.Version
		} else {
			res.Version = mig.Version - 1
		}
		if !ran {
			continue
		}
		d := time.Since(start)
		res.Versions = append(res.Versions, AppliedVersion{Version: mig.Version, Name: mig.Name, Duration: d})
		m.logger.InfoContext(ctx, "migration applied",
			slog.Int("version", mig.Version),
			slog.String("name", mig.Name),
			slog.String("direction", string(dir)),
			slog.Duration("duration", d))
	}
	return res, nil
}
