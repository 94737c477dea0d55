package postgres

import (
	"context"
	"embed"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskloom/taskloom/migrations"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the driver's migrations, in version order.
func Migrations() ([]migrations.Migration, error) {
	return migrations.ParseDir(migrationFiles, "migrations")
}

// NewMigrator returns a migrator of the PostgreSQL database of pool with
// the driver's migrations (or opts.Migrations). It works in the current
// schema of the pool's connections (their search_path).
func NewMigrator(pool *pgxpool.Pool, opts *migrations.Opts) (*migrations.Migrator, error) {
	set, err := Migrations()
	if err != nil {
		return nil, err
	}
	return migrations.New(set, func(ctx context.Context) (migrations.Session, error) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return &session{conn: conn}, nil
	}, opts)
}

// session is a migrations.Session on one pooled connection.
type session struct {
	conn   *pgxpool.Conn
	locked bool
	key    int64
}

// Lock takes an advisory lock for the current schema, so that tests
// migrating their own schemas do not wait on each other.
func (s *session) Lock(ctx context.Context) error {
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

func (s *session) EnsureTable(ctx context.Context) error {
	var exists bool
	err := s.conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, migrations.VersionTable).Scan(&exists)
	if err != nil || exists {
		return err
	}
	_, err = s.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+migrations.VersionTable+` (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`)
	return err
}

func (s *session) Version(ctx context.Context) (int, error) {
	var v int
	err := s.conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+migrations.VersionTable).Scan(&v)
	return v, err
}

func (s *session) Apply(ctx context.Context, m migrations.Migration, dir migrations.Direction) (bool, error) {
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var tag interface{ RowsAffected() int64 }
	body := m.Up
	if dir == migrations.Up {
		tag, err = tx.Exec(ctx, `INSERT INTO `+migrations.VersionTable+` (version, name) VALUES ($1, $2) ON CONFLICT (version) DO NOTHING`, m.Version, m.Name)
	} else {
		body = m.Down
		tag, err = tx.Exec(ctx, `DELETE FROM `+migrations.VersionTable+` WHERE version = $1`, m.Version)
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

func (s *session) Release() {
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
