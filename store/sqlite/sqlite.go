package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/taskloom/taskloom/graph/checkpoint"
	"github.com/taskloom/taskloom/migrations"
	"github.com/taskloom/taskloom/store"

	// The "sqlite" database/sql driver.
	_ "modernc.org/sqlite"
)

var _ store.Driver = (*Driver)(nil)

// Opts configures a SQLite driver. Nil means defaults.
type Opts struct {
	// Logger receives the migrations applied on open. Nil discards them.
	Logger *slog.Logger
	// Synchronous is SQLite's synchronous pragma: "NORMAL" (the default)
	// or "FULL". In WAL mode NORMAL loses no committed transaction when the
	// process is killed, only (the last few) when the machine loses power
	// or the OS crashes; FULL syncs the WAL on every commit and survives
	// those too, at the cost of one fsync per write.
	Synchronous string
	// BusyTimeout is how long a write waits for another process's write
	// lock before failing. Zero means 5 seconds.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool. Zero means 4.
	ReadConns int
	// SkipMigrate opens the database without applying migrations.
	SkipMigrate bool
}

// Driver keeps taskloom's records (checkpoints, runs, agent histories) in a
// SQLite database file, in WAL mode. All writes go through one connection (SQLite has one writer at
// a time anyway), reads through a small pool. Times are stored to the
// microsecond.
//
// The file's identity is recorded when it opens, and each write checks it
// first (one stat): a database file deleted or replaced under a running
// process fails the write with a *checkpoint.ReplacedError instead of writing into a
// file nobody will read again.
type Driver struct {
	path  string
	w     *sql.DB // one connection; transactions begin IMMEDIATE
	r     *sql.DB // read pool; r == w for an in-memory database
	mig   *migrations.Migrator
	ident os.FileInfo // the file opened; nil for ":memory:"
}

// Open opens (creating it if needed) the SQLite database at path and
// applies the migrations. path ":memory:" opens a private in-memory
// database.
func Open(ctx context.Context, path string, opts *Opts) (*Driver, error) {
	if opts == nil {
		opts = &Opts{}
	}
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: database path %q must not contain '?' or '#'", path)
	}
	if path != ":memory:" {
		if dir := filepath.Dir(path); dir != "" {
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				return nil, fmt.Errorf("sqlite: open %s: directory %s does not exist", path, dir)
			}
		}
	}
	sync := strings.ToUpper(opts.Synchronous)
	switch sync {
	case "":
		sync = "NORMAL"
	case "NORMAL", "FULL":
	default:
		return nil, fmt.Errorf("sqlite: synchronous must be NORMAL or FULL, got %q", opts.Synchronous)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	readConns := opts.ReadConns
	if readConns <= 0 {
		readConns = 4
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=synchronous(%s)", busy.Milliseconds(), sync)
	w, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_txlock=immediate&"+common)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Driver{path: path, w: w, r: w}
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if path != ":memory:" {
		if s.ident, err = os.Stat(path); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
		// On Windows a FileInfo from Stat reads the file's ID only when
		// first compared; compare it now so that it is the ID of the file
		// opened, not of whatever is at the path later.
		_ = os.SameFile(s.ident, s.ident)
		r, err := sql.Open("sqlite", path+"?_pragma=query_only(1)&"+common)
		if err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
		r.SetMaxOpenConns(readConns)
		r.SetMaxIdleConns(readConns)
		s.r = r
	}
	s.mig, err = NewMigrator(w, &migrations.Opts{Logger: opts.Logger})
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	if !opts.SkipMigrate {
		if _, err := s.mig.Migrate(ctx, migrations.Up, nil); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("sqlite: migrate %s: %w", path, err)
		}
	}
	return s, nil
}

// DB returns the database's write connection, for storing other records in
// the same database. It holds a single connection: do not call the saver
// while holding a transaction on it.
func (s *Driver) DB() *sql.DB { return s.w }

// ReadDB returns the read pool (the write connection for ":memory:").
func (s *Driver) ReadDB() *sql.DB { return s.r }

// Path is the database file.
func (s *Driver) Path() string { return s.path }

// Migrator returns the migrator of the database.
func (s *Driver) Migrator() *migrations.Migrator { return s.mig }

// Migrate applies the pending migrations.
func (s *Driver) Migrate(ctx context.Context) (*migrations.Result, error) {
	return s.mig.Migrate(ctx, migrations.Up, nil)
}

// Close implements checkpoint.Saver.
func (s *Driver) Close() error {
	var err error
	if s.r != s.w {
		err = s.r.Close()
	}
	return errors.Join(err, s.w.Close())
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// blob binds nil as NULL, so that a nil slice stays nil.
func blob(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// unblob turns what the driver read back into the stored value: the driver
// reads an empty BLOB as nil, so notNull tells the two apart.
func unblob(b []byte, notNull bool) []byte {
	if b == nil && notNull {
		return []byte{}
	}
	return b
}

func encodeWriters(ws []string) (any, error) {
	if ws == nil {
		return nil, nil
	}
	b, err := json.Marshal(ws)
	return string(b), err
}

func decodeWriters(s sql.NullString) ([]string, error) {
	if !s.Valid {
		return nil, nil
	}
	var ws []string
	if err := json.Unmarshal([]byte(s.String), &ws); err != nil {
		return nil, fmt.Errorf("decode writers: %w", err)
	}
	return ws, nil
}

// Acquire implements checkpoint.Saver.
func (s *Driver) Acquire(ctx context.Context, threadID, holder string, now time.Time, ttl time.Duration) (checkpoint.Lease, error) {
	var lease checkpoint.Lease
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		var (
			cur     sql.NullString
			token   int64
			expires int64
		)
		nowUS := micros(now)
		if now.IsZero() {
			var err error
			if nowUS, err = storeNow(ctx, tx); err != nil {
				return err
			}
		}
		expUS := nowUS + ttl.Microseconds()
		err := tx.QueryRowContext(ctx, `SELECT lease_holder, lease_token, lease_expires FROM threads WHERE thread_id = ?`, threadID).
			Scan(&cur, &token, &expires)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `INSERT INTO threads
				(thread_id, head, lease_holder, lease_token, lease_expires, ttl_us, created_at, updated_at)
				VALUES (?, -1, ?, 1, ?, ?, ?, ?)`,
				threadID, holder, expUS, ttl.Microseconds(), nowUS, nowUS)
			token = 1
		case err != nil:
			return err
		default:
			if cur.Valid && cur.String != holder && nowUS < expires {
				return &checkpoint.BusyError{ThreadID: threadID, Holder: cur.String, Expires: fromMicros(expires)}
			}
			if !cur.Valid || cur.String != holder || nowUS >= expires {
				token++
			}
			_, err = tx.ExecContext(ctx, `UPDATE threads SET lease_holder = ?, lease_token = ?, lease_expires = ?, ttl_us = ?
				WHERE thread_id = ?`, holder, token, expUS, ttl.Microseconds(), threadID)
		}
		lease = checkpoint.Lease{ThreadID: threadID, Holder: holder, Token: token, Expires: now.Add(ttl), StoreClock: now.IsZero()}
		if now.IsZero() {
			lease.Expires = fromMicros(expUS)
		}
		return err
	})
	if err != nil {
		return checkpoint.Lease{}, err
	}
	return lease, nil
}

// Release implements checkpoint.Saver.
func (s *Driver) Release(ctx context.Context, lease checkpoint.Lease) error {
	_, err := s.w.ExecContext(ctx, `UPDATE threads SET lease_holder = NULL
		WHERE thread_id = ? AND lease_token = ? AND lease_holder IS NOT NULL`, lease.ThreadID, lease.Token)
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	return nil
}

// checkLease fails with checkpoint.ErrLeaseLost unless lease is the thread's current
// one. It returns the thread's head.
func checkLease(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, lease checkpoint.Lease) (int64, error) {
	var (
		token int64
		held  bool
		head  int64
	)
	err := q.QueryRowContext(ctx, `SELECT lease_token, lease_holder IS NOT NULL, head FROM threads WHERE thread_id = ?`, lease.ThreadID).
		Scan(&token, &held, &head)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, checkpoint.ErrLeaseLost
	}
	if err != nil {
		return 0, err
	}
	if !held || token != lease.Token {
		return 0, checkpoint.ErrLeaseLost
	}
	return head, nil
}

// Put implements checkpoint.Saver.
func (s *Driver) Put(ctx context.Context, lease checkpoint.Lease, cp checkpoint.Checkpoint) error {
	writers, err := encodeWriters(cp.Writers)
	if err != nil {
		return err
	}
	at := micros(cp.CreatedAt)
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		// A lease taken on the store's clock is renewed on it.
		renewAt := at
		if lease.StoreClock {
			var err error
			if renewAt, err = storeNow(ctx, tx); err != nil {
				return err
			}
		}
		r, err := tx.ExecContext(ctx, `UPDATE threads SET head = ?1, updated_at = ?2, lease_expires = ?5 + ttl_us
			WHERE thread_id = ?3 AND lease_token = ?4 AND lease_holder IS NOT NULL AND head = ?1 - 1`,
			cp.Step, at, lease.ThreadID, lease.Token, renewAt)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			if _, err := checkLease(ctx, tx, lease); err != nil {
				return err
			}
			return checkpoint.ErrConflict
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO checkpoints
			(thread_id, step, source, writers, deltas, snapshot, next, meta, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			lease.ThreadID, cp.Step, cp.Source, writers, blob(cp.Deltas), blob(cp.Snapshot), blob(cp.Next), blob(cp.Meta), at)
		if err != nil {
			return err
		}
		// Writes of steps up to the new head are settled by it.
		_, err = tx.ExecContext(ctx, `DELETE FROM writes WHERE thread_id = ? AND step <= ?`, lease.ThreadID, cp.Step)
		return err
	})
}

// PutWrites implements checkpoint.Saver.
func (s *Driver) PutWrites(ctx context.Context, lease checkpoint.Lease, writes []checkpoint.Write) error {
	writes = checkpoint.DedupWrites(writes)
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := checkLease(ctx, tx, lease); err != nil {
			return err
		}
		if len(writes) == 0 {
			return nil
		}
		var seq int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) FROM writes WHERE thread_id = ?`, lease.ThreadID).Scan(&seq); err != nil {
			return err
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO writes (thread_id, step, task_id, kind, payload, seq)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (thread_id, step, task_id, kind) DO UPDATE SET payload = excluded.payload, seq = excluded.seq`)
		if err != nil {
			return err
		}
		defer func() { _ = stmt.Close() }()
		for _, w := range writes {
			seq++
			if _, err := stmt.ExecContext(ctx, lease.ThreadID, w.Step, w.TaskID, string(w.Kind), blob(w.Payload), seq); err != nil {
				return err
			}
		}
		return nil
	})
}

// Load implements checkpoint.Saver.
func (s *Driver) Load(ctx context.Context, threadID string, step int64) (checkpoint.Loaded, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, err)
	}
	defer func() { _ = tx.Rollback() }()
	var head int64
	err = tx.QueryRowContext(ctx, `SELECT head FROM threads WHERE thread_id = ?`, threadID).Scan(&head)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && head < 0) {
		return checkpoint.Loaded{}, checkpoint.ErrNotFound
	}
	if err != nil {
		return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, err)
	}
	if step < 0 {
		step = head
	}
	if step > head {
		return checkpoint.Loaded{}, checkpoint.ErrNotFound
	}
	rows, err := tx.QueryContext(ctx, `SELECT step, source, writers,
			deltas, deltas IS NOT NULL, snapshot, snapshot IS NOT NULL, next, next IS NOT NULL, meta, meta IS NOT NULL, created_at
		FROM checkpoints
		WHERE thread_id = ?1 AND step <= ?2 AND step >= coalesce(
			(SELECT max(step) FROM checkpoints WHERE thread_id = ?1 AND step <= ?2 AND snapshot IS NOT NULL),
			(SELECT min(step) FROM checkpoints WHERE thread_id = ?1))
		ORDER BY step`, threadID, step)
	if err != nil {
		return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, err)
	}
	out := checkpoint.Loaded{Head: head}
	for rows.Next() {
		cp := checkpoint.Checkpoint{ThreadID: threadID}
		var (
			writers                sql.NullString
			hasD, hasS, hasN, hasM bool
			at                     int64
		)
		if err := rows.Scan(&cp.Step, &cp.Source, &writers, &cp.Deltas, &hasD, &cp.Snapshot, &hasS, &cp.Next, &hasN, &cp.Meta, &hasM, &at); err != nil {
			_ = rows.Close()
			return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, err)
		}
		cp.Deltas, cp.Snapshot, cp.Next, cp.Meta = unblob(cp.Deltas, hasD), unblob(cp.Snapshot, hasS), unblob(cp.Next, hasN), unblob(cp.Meta, hasM)
		cp.CreatedAt = fromMicros(at)
		if cp.Writers, err = decodeWriters(writers); err != nil {
			_ = rows.Close()
			return checkpoint.Loaded{}, &checkpoint.DecodeError{ThreadID: threadID, Step: cp.Step, Err: err}
		}
		out.Chain = append(out.Chain, cp)
	}
	if err := rows.Err(); err != nil {
		return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, err)
	}
	if len(out.Chain) == 0 || out.Chain[len(out.Chain)-1].Step != step {
		return checkpoint.Loaded{}, checkpoint.ErrNotFound
	}
	if step == head {
		rows, err := tx.QueryContext(ctx, `SELECT step, task_id, kind, payload, payload IS NOT NULL FROM writes
			WHERE thread_id = ? AND step = ? ORDER BY seq`, threadID, head+1)
		if err != nil {
			return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, err)
		}
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			w := checkpoint.Write{ThreadID: threadID}
			var kind string
			var has bool
			if err := rows.Scan(&w.Step, &w.TaskID, &kind, &w.Payload, &has); err != nil {
				return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, err)
			}
			w.Kind, w.Payload = checkpoint.WriteKind(kind), unblob(w.Payload, has)
			out.Writes = append(out.Writes, w)
		}
		if err := rows.Err(); err != nil {
			return checkpoint.Loaded{}, fmt.Errorf("load %s: %w", threadID, err)
		}
	}
	return out, nil
}

// List implements checkpoint.Saver.
func (s *Driver) List(ctx context.Context, threadID string, limit int) ([]checkpoint.Checkpoint, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.r.QueryContext(ctx, `SELECT step, source, writers, meta, meta IS NOT NULL, created_at FROM checkpoints
		WHERE thread_id = ? ORDER BY step DESC LIMIT ?`, threadID, limit)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", threadID, err)
	}
	defer func() { _ = rows.Close() }()
	var out []checkpoint.Checkpoint
	for rows.Next() {
		cp := checkpoint.Checkpoint{ThreadID: threadID}
		var (
			writers sql.NullString
			hasM    bool
			at      int64
		)
		if err := rows.Scan(&cp.Step, &cp.Source, &writers, &cp.Meta, &hasM, &at); err != nil {
			return nil, fmt.Errorf("list %s: %w", threadID, err)
		}
		cp.Meta, cp.CreatedAt = unblob(cp.Meta, hasM), fromMicros(at)
		if cp.Writers, err = decodeWriters(writers); err != nil {
			return nil, &checkpoint.DecodeError{ThreadID: threadID, Step: cp.Step, Err: err}
		}
		out = append(out, cp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", threadID, err)
	}
	if len(out) == 0 {
		var one int
		err := s.r.QueryRowContext(ctx, `SELECT 1 FROM threads WHERE thread_id = ?`, threadID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, checkpoint.ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", threadID, err)
		}
	}
	return out, nil
}

// Threads implements checkpoint.Saver.
func (s *Driver) Threads(ctx context.Context) ([]checkpoint.ThreadInfo, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT thread_id, head, lease_holder, lease_expires, created_at, updated_at FROM threads
		ORDER BY updated_at DESC, thread_id`)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	defer func() { _ = rows.Close() }()
	out := []checkpoint.ThreadInfo{}
	for rows.Next() {
		var (
			info          checkpoint.ThreadInfo
			holder        sql.NullString
			exp, cat, uat int64
		)
		if err := rows.Scan(&info.ThreadID, &info.Head, &holder, &exp, &cat, &uat); err != nil {
			return nil, fmt.Errorf("list threads: %w", err)
		}
		info.Holder, info.CreatedAt, info.UpdatedAt = holder.String, fromMicros(cat), fromMicros(uat)
		if holder.Valid {
			info.Expires = fromMicros(exp)
		}
		out = append(out, info)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	return out, nil
}

// Prune implements checkpoint.Saver.
func (s *Driver) Prune(ctx context.Context, lease checkpoint.Lease, keepFrom int64, snapshot []byte) error {
	return s.writeTx(ctx, func(tx *sql.Tx) error {
		if _, err := checkLease(ctx, tx, lease); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, `UPDATE checkpoints SET snapshot = ? WHERE thread_id = ? AND step = ?`,
			blob(snapshot), lease.ThreadID, keepFrom)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return checkpoint.ErrNotFound
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM checkpoints WHERE thread_id = ? AND step < ?`, lease.ThreadID, keepFrom); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM writes WHERE thread_id = ? AND step < ?`, lease.ThreadID, keepFrom)
		return err
	})
}

// writeTx runs fn in an IMMEDIATE transaction on the write connection and
// commits it when fn returns nil. Errors other than the package's sentinels
// and *checkpoint.BusyError are wrapped with the saver's name.
func (s *Driver) writeTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if err := s.checkFile(); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return checkpoint.WrapStoreError("sqlite", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

// checkFile fails with a *checkpoint.ReplacedError when the file at the saver's path
// is no longer the one it opened.
func (s *Driver) checkFile() error {
	if s.ident == nil {
		return nil
	}
	fi, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return &checkpoint.ReplacedError{Path: s.path, Deleted: true}
	}
	if err != nil {
		return fmt.Errorf("sqlite: stat %s: %w", s.path, err)
	}
	if !os.SameFile(fi, s.ident) {
		return &checkpoint.ReplacedError{Path: s.path}
	}
	return nil
}

// CheckFile fails with a *checkpoint.ReplacedError when the database file was deleted
// or replaced since the saver opened it. Every write checks it first.
func (s *Driver) CheckFile() error { return s.checkFile() }

// storeNow reads the store's clock, in microseconds: the clock of the
// machine the file is on, the same for every process that opens it.
func storeNow(ctx context.Context, tx *sql.Tx) (int64, error) {
	var us int64
	err := tx.QueryRowContext(ctx, `SELECT CAST(unixepoch('subsec') * 1000000 AS INTEGER)`).Scan(&us)
	return us, err
}

// Path returns the file path of a SQLite database URL: it strips a
// sqlite:// (so sqlite:///abs/path is /abs/path), sqlite:, file:// or
// file: prefix.
func Path(dbURL string) string {
	for _, p := range []string{"sqlite://", "sqlite:", "file://", "file:"} {
		if len(dbURL) >= len(p) && strings.EqualFold(dbURL[:len(p)], p) {
			return dbURL[len(p):]
		}
	}
	return dbURL
}
