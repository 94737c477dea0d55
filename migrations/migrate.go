package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	// Migrations replaces the embedded set of the dialect (for tests). It
	// must be in version order, numbered from 1 without gaps.
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
	newSession func(ctx context.Context) (session, error)
}

// session is one connection that a Migrate call works on.
type session interface {
	// lock serializes migrators on the database until release.
	lock(ctx context.Context) error
	ensureTable(ctx context.Context) error
	version(ctx context.Context) (int, error)
	// apply runs the SQL and records (up) or removes (down) version's row
	// in one transaction. It reports false, having changed nothing, when
	// the row already was in that state.
	apply(ctx context.Context, m Migration, dir Direction) (bool, error)
	release()
}

func newMigrator(d Dialect, opts *Opts) (*Migrator, error) {
	if opts == nil {
		opts = &Opts{}
	}
	m := &Migrator{migrations: opts.Migrations, logger: opts.Logger}
	if m.migrations == nil {
		all, err := All(d)
		if err != nil {
			return nil, err
		}
		m.migrations = all
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

// NewPostgres returns a migrator for the PostgreSQL database of pool. It
// works in the current schema of the pool's connections (their
// search_path).
func NewPostgres(pool *pgxpool.Pool, opts *Opts) (*Migrator, error) {
	m, err := newMigrator(Postgres, opts)
	if err != nil {
		return nil, err
	}
	m.newSession = func(ctx context.Context) (session, error) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return &pgSession{conn: conn}, nil
	}
	return m, nil
}

// NewSQLite returns a migrator for the SQLite database db.
func NewSQLite(db *sql.DB, opts *Opts) (*Migrator, error) {
	m, err := newMigrator(SQLite, opts)
	if err != nil {
		return nil, err
	}
	m.newSession = func(ctx context.Context) (session, error) {
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		return &sqliteSession{conn: conn}, nil
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
	defer s.release()
	if err := s.ensureTable(ctx); err != nil {
		return 0, fmt.Errorf("create %s: %w", VersionTable, err)
	}
	return s.version(ctx)
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
	defer s.release()
	if err := s.lock(ctx); err != nil {
		return nil, fmt.Errorf("take migration lock: %w", err)
	}
	if err := s.ensureTable(ctx); err != nil {
		return nil, fmt.Errorf("create %s: %w", VersionTable, err)
	}
	cur, err := s.version(ctx)
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
		ran, err := s.apply(ctx, mig, dir)
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

type pgSession struct {
	conn   *pgxpool.Conn
	locked bool
	key    int64
}

func (s *pgSession) lock(ctx context.Context) error {
	// One lock per schema, so that tests migrating their own schemas do not
	// wait on each other.
	err := s.conn.QueryRow(ctx,
		`SELECT hashtextextended('taskloom.migrate.' || coalesce(current_schema(), ''), 0)`).Scan(&s.key)
	if err != nil {
		return err
	}
	if _, err := s.conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, s.key); err != nil {
		return err
	}
	s.locked = true
	return nil
}

func (s *pgSession) ensureTable(ctx context.Context) error {
	var exists bool
	err := s.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, VersionTable).Scan(&exists)
	if err != nil || exists {
		return err
	}
	_, err = s.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+VersionTable+` (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`)
	return err
}

func (s *pgSession) version(ctx context.Context) (int, error) {
	var v int
	err := s.conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+VersionTable).Scan(&v)
	return v, err
}

func (s *pgSession) apply(ctx context.Context, m Migration, dir Direction) (bool, error) {
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var tag interface{ RowsAffected() int64 }
	body := m.Up
	if dir == Up {
		tag, err = tx.Exec(ctx, `INSERT INTO `+VersionTable+` (version, name) VALUES ($1, $2) ON CONFLICT (version) DO NOTHING`, m.Version, m.Name)
	} else {
		body = m.Down
		tag, err = tx.Exec(ctx, `DELETE FROM `+VersionTable+` WHERE version = $1`, m.Version)
	}
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	// No arguments: pgx sends the simple protocol, which runs several
	// statements.
	if _, err := tx.Exec(ctx, body, pgx.QueryExecModeSimpleProtocol); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

func (s *pgSession) release() {
	if s.locked {
		_, err := s.conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, s.key)
		if err != nil {
			// The lock is the session's: drop the connection rather than
			// return it to the pool still locked.
			_ = s.conn.Conn().Close(context.Background())
		}
	}
	s.conn.Release()
}

type sqliteSession struct {
	conn *sql.Conn
}

// lock does nothing: each migration's transaction takes SQLite's write lock
// with its first statement, and apply skips a version another process
// recorded first.
func (s *sqliteSession) lock(context.Context) error { return nil }

func (s *sqliteSession) ensureTable(ctx context.Context) error {
	_, err := s.conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+VersionTable+` (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`)
	return err
}

func (s *sqliteSession) version(ctx context.Context) (int, error) {
	var v int
	err := s.conn.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM `+VersionTable).Scan(&v)
	return v, err
}

func (s *sqliteSession) apply(ctx context.Context, m Migration, dir Direction) (bool, error) {
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	// The first statement writes, so the transaction takes the write lock
	// before it reads anything and cannot deadlock upgrading a read lock.
	var r sql.Result
	body := m.Up
	if dir == Up {
		r, err = tx.ExecContext(ctx, `INSERT INTO `+VersionTable+` (version, name, applied_at) VALUES (?, ?, ?) ON CONFLICT (version) DO NOTHING`,
			m.Version, m.Name, time.Now().UnixMicro())
	} else {
		body = m.Down
		r, err = tx.ExecContext(ctx, `DELETE FROM `+VersionTable+` WHERE version = ?`, m.Version)
	}
	if err != nil {
		return false, err
	}
	if n, err := r.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

func (s *sqliteSession) release() { _ = s.conn.Close() }
