package checkpointtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskloom/taskloom/internal/proc"
)

// PostgresServer is a PostgreSQL server of a test's own, in a temporary
// folder, for tests that stop and restart the database under a running
// saver. The shared test database must never be restarted; this one may.
// Its URL stays the same across Stop and Start.
type PostgresServer struct {
	tb    testing.TB
	bin   string // folder of initdb, pg_ctl and postgres
	dir   string // temporary folder: data, socket and log
	port  int
	owner *user.User // the OS user the server runs as when we are root

	mu      sync.Mutex
	running bool
}

// StartPostgres initialises a new cluster (trust auth, fsync off) on a free
// port, starts it, and stops and removes it when the test ends. The server
// binaries come from TASKLOOM_TEST_PG_BIN, PATH, or /usr/lib/postgresql/*/bin;
// without them the test is skipped, or fails when CI=true. As root, the
// server runs as the postgres OS user, since initdb refuses root.
func StartPostgres(tb testing.TB) *PostgresServer {
	tb.Helper()
	bin, err := postgresBin()
	if err != nil {
		msg := fmt.Sprintf("PostgreSQL server binaries not found (%v); install them with: apt-get install postgresql", err)
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	s := &PostgresServer{tb: tb, bin: bin}
	if os.Geteuid() == 0 {
		if s.owner, err = user.Lookup("postgres"); err != nil {
			tb.Fatalf("running as root, the test server needs the postgres OS user: %v", err)
		}
	}
	// Not t.TempDir: its parents are private to root, and the server may
	// run as another user.
	s.dir, err = os.MkdirTemp("", "taskloom-pg-")
	if err != nil {
		tb.Fatalf("postgres test server: %v", err)
	}
	tb.Cleanup(func() {
		s.stop("immediate")
		_ = os.RemoveAll(s.dir)
	})
	if s.owner != nil {
		uid, _ := strconv.Atoi(s.owner.Uid)
		gid, _ := strconv.Atoi(s.owner.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			tb.Fatalf("postgres test server: %v", err)
		}
	}
	s.port = freePort(tb)
	s.run("initdb", "-D", s.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
	s.Start()
	return s
}

// URL is the server's postgres database, as user postgres.
func (s *PostgresServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Start starts the stopped server and waits until it accepts connections.
func (s *PostgresServer) Start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
		s.port, s.dir)
	s.run("pg_ctl", "-D", s.data(), "-o", opts, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "start")
	s.running = true
}

// Stop shuts the server down the way an administrator restarting it does
// ("fast": open sessions end with SQLSTATE 57P01) and waits until it is
// down.
func (s *PostgresServer) Stop() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		s.run("pg_ctl", "-D", s.data(), "-m", "fast", "-w", "-t", "60", "stop")
		s.running = false
	}
}

// Restart stops the server and starts it again on the same port.
func (s *PostgresServer) Restart() {
	s.tb.Helper()
	s.Stop()
	s.Start()
}

// Exec runs SQL on the server's postgres database, for a test to reach
// behind a saver's back.
func (s *PostgresServer) Exec(sql string, args ...any) {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		s.tb.Fatalf("connect to the test server: %v", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		s.tb.Fatalf("exec %q: %v", sql, err)
	}
}

// stop is Stop for clean-up: it reports nothing.
func (s *PostgresServer) stop(mode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		_, _ = proc.Run(context.Background(), s.command("pg_ctl", "-D", s.data(), "-m", mode, "-w", "stop"))
		s.running = false
	}
}

func (s *PostgresServer) data() string { return filepath.Join(s.dir, "data") }

func (s *PostgresServer) command(tool string, args ...string) proc.Cmd {
	path := filepath.Join(s.bin, tool)
	if s.owner != nil {
		return proc.Cmd{Args: append([]string{"runuser", "-u", s.owner.Username, "--", path}, args...)}
	}
	return proc.Cmd{Args: append([]string{path}, args...)}
}

func (s *PostgresServer) run(tool string, args ...string) {
	s.tb.Helper()
	cmd := s.command(tool, args...)
	cmd.Dir = s.dir
	res, err := proc.Run(context.Background(), cmd)
	out := res.Output
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit status %d", res.ExitCode)
	}
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		s.tb.Fatalf("%s %s: %v\n%s\nserver log:\n%s", tool, strings.Join(args, " "), err, out, log)
	}
}

// postgresBin finds the folder of the server binaries.
func postgresBin() (string, error) {
	if dir := os.Getenv("TASKLOOM_TEST_PG_BIN"); dir != "" {
		return dir, hasServer(dir)
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if dir := filepath.Dir(p); hasServer(dir) == nil {
			return dir, nil
		}
	}
	if runtime.GOOS == "windows" {
		return "", fmt.Errorf("pg_ctl is not on PATH")
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// The newest major version first.
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, dir := range dirs {
		if hasServer(dir) == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no initdb, pg_ctl and postgres on PATH or in /usr/lib/postgresql/*/bin")
}

func hasServer(dir string) error {
	for _, tool := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, tool)); err != nil {
			return fmt.Errorf("%s: %w", tool, err)
		}
	}
	return nil
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
