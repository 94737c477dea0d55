package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"time"

	"github.com/taskloom/taskloom/migrations"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the driver's migrations, in version order.
func Migrations() ([]migrations.Migration, error) {
	return migrations.ParseDir(migrationFiles, "migrations")
}

// NewMigrator returns a migrator of the SQLite database db with the
// driver's migrations (or opts.Migrations).
func NewMigrator(db *sql.DB, opts *migrations.Opts) (*migrations.Migrator, error) {
	set, err := Migrations()
	if err != nil {
		return nil, err
	}
	return migrations.New(set, func(ctx context.Context) (migrations.Session, error) {
		conn, err := db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		return &session{conn: conn}, nil
	}, opts)
}

// session is a migrations.Session on one connection.
type session struct {
	conn *sql.Conn
}

// Lock does nothing: each migration's transaction takes SQLite's write lock
// with its first statement, and Apply skips a version another process
// recorded first.
func (s *session) Lock(context.Context) error { return nil }

func (s *session) EnsureTable(ctx context.Context) error {
	_, err := s.conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+migrations.VersionTable+` (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`)
	return err
}

func (s *session) Version(ctx context.Context) (int, error) {
	var v int
	err := s.conn.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM `+migrations.VersionTable).Scan(&v)
	return v, err
}

func (s *session) Apply(ctx context.Context, m migrations.Migration, dir migrations.Direction) (bool, error) {
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	// The first statement writes, so the transaction takes the write lock
	// before it reads anything and cannot deadlock upgrading a read lock.
	var r sql.Result
	body := m.Up
	if dir == migrations.Up {
		r, err = tx.ExecContext(ctx, `INSERT INTO `+migrations.VersionTable+` (version, name, applied_at) VALUES (?, ?, ?) ON CONFLICT (version) DO NOTHING`,
			m.Version, m.Name, time.Now().UnixMicro())
	} else {
		body = m.Down
		r, err = tx.ExecContext(ctx, `DELETE FROM `+migrations.VersionTable+` WHERE version = ?`, m.Version)
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

func (s *session) Release() { _ = s.conn.Close() }
