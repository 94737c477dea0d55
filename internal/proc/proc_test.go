package proc_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/internal/proc"
)

func TestRunOutputAndExitCode(t *testing.T) {
	t.Parallel()
	res, err := proc.Run(context.Background(), proc.Cmd{Args: []string{"sh", "-c", "echo out; echo err >&2; printf tail; exit 3"}})
	require.NoError(t, err)
	require.Equal(t, 3, res.ExitCode)
	require.Equal(t, "out\ntail", res.Stdout)
	require.Equal(t, "err\n", res.Stderr)
	require.Contains(t, res.Output, "out\n")
	require.Contains(t, res.Output, "err\n")
	require.False(t, res.TimedOut)
}

func TestRunCapsOutput(t *testing.T) {
	t.Parallel()
	res, err := proc.Run(context.Background(), proc.Cmd{
		Args: []string{"sh", "-c", "echo first; i=0; while [ $i -lt 2000 ]; do echo line$i; i=$((i+1)); done; echo last"}, OutputLimit: 200})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(res.Stdout, "first\n"), res.Stdout)
	require.True(t, strings.HasSuffix(res.Stdout, "last\n"), res.Stdout)
	require.Contains(t, res.Stdout, "bytes omitted")
	require.Less(t, len(res.Stdout), 400)
}

func TestRunTimeoutKillsTheGroup(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("process groups are unix-only")
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "survivor")
	// The background child would write the marker after the parent is
	// gone, unless the whole group dies with it.
	res, err := proc.Run(context.Background(), proc.Cmd{
		Args:    []string{"sh", "-c", "(sleep 2; touch " + marker + ") & sleep 60"},
		Timeout: 300 * time.Millisecond,
	})
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	// The survivor would have written by now; poll its absence after its
	// deadline via a second command that outlives it.
	_, err = proc.Run(context.Background(), proc.Cmd{Args: []string{"sleep", "2.5"}})
	require.NoError(t, err)
	require.NoFileExists(t, marker)
}

func TestRunContextCancelIsAnError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := proc.Run(ctx, proc.Cmd{Args: []string{"sleep", "5"}})
	require.ErrorIs(t, err, context.Canceled)
}

func TestReduceEnv(t *testing.T) {
	t.Parallel()
	env := proc.ReduceEnv([]string{"PATH=/bin", "HOME=/root", "AWS_SECRET_ACCESS_KEY=abc", "GOFLAGS=-x"},
		[]string{"PATH", "HOME", "GOFLAGS"}, "HOME=/tmp/h", "TMPDIR=/tmp/t")
	require.Equal(t, []string{"PATH=/bin", "GOFLAGS=-x", "HOME=/tmp/h", "TMPDIR=/tmp/t"}, env)
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	r := proc.NewRedactor([]string{
		"PATH=/usr/bin:/bin", "PWD=/work/repo", "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI", "DEBUG=1",
		"DATABASE_URL=postgres://u:hunter22@db/x", "UNLISTED_THING=s3cr3t-value", "HOME=/root",
	}, []string{"PATH", "HOME"}, "sk-ant-provider-key")
	got := r.Redact("key wJalrXUtnFEMI url postgres://u:hunter22@db/x other s3cr3t-value provider sk-ant-provider-key in /work/repo debug 1")
	require.Equal(t, "key [REDACTED] url [REDACTED] other [REDACTED] provider [REDACTED] in /work/repo debug 1", got)
	require.Equal(t, "x", (*proc.Redactor)(nil).Redact("x"))
}

// TestSandbox runs hostile commands in the sandbox and checks that what
// Probe says is enforced is enforced.
func TestSandbox(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox is Linux-only")
	}
	st := proc.Probe()
	t.Logf("%s", st)
	if os.Getenv("CI") == "true" {
		// CI runs on Linux machines where all of it works; a regression
		// must not pass as "degraded".
		require.True(t, st.Complete(), "sandbox incomplete in CI: %s", st)
	}
	work := t.TempDir()
	outside := t.TempDir()
	env := proc.ReduceEnv(os.Environ(), []string{"PATH", "HOME"})
	run := func(script string, network bool) proc.Result {
		t.Helper()
		res, err := proc.Run(context.Background(), proc.Cmd{
			Args: []string{"sh", "-c", script}, Dir: work, Env: env, Timeout: 20 * time.Second,
			Sandbox: &proc.Policy{Writable: []string{work}, Network: network},
		})
		require.NoError(t, err)
		return res
	}

	res := run("echo ok > inside && cat inside && echo x > /dev/null && echo done", false)
	require.Equal(t, 0, res.ExitCode, res.Output)
	require.Equal(t, "ok\ndone\n", res.Stdout)

	if st.Landlock > 0 {
		res = run("echo pwned > "+filepath.Join(outside, "f")+"; rm -rf "+outside+"; mkdir "+filepath.Join(outside, "d"), false)
		require.NoFileExists(t, filepath.Join(outside, "f"))
		require.NoDirExists(t, filepath.Join(outside, "d"))
		require.DirExists(t, outside)
	}
	if st.Processes {
		// Only the sandbox's own processes are visible: not this test's,
		// whose environment holds the secrets.
		res = run("ls /proc | grep -E '^[0-9]+$' | wc -l; cat /proc/"+itoa(os.Getpid())+"/environ 2>&1 || echo unreadable", false)
		require.Equal(t, 0, res.ExitCode, res.Output)
		lines := strings.Fields(res.Stdout)
		require.NotEmpty(t, lines)
		require.LessOrEqual(t, atoi(t, lines[0]), 4, res.Output)
	}
	if st.Network {
		// The shared PostgreSQL server listens on the host's loopback;
		// the sandbox has a loopback of its own, unless the policy allows
		// the network.
		probe := "bash -c 'exec 3<>/dev/tcp/127.0.0.1/5432 && echo connected' 2>/dev/null || echo refused"
		require.Equal(t, "refused\n", run(probe, false).Stdout)
		require.Equal(t, "connected\n", run(probe, true).Stdout, "with sandbox.network the host is reachable (is PostgreSQL up at 127.0.0.1:5432?)")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

func TestRunRedacts(t *testing.T) {
	t.Parallel()
	r := proc.NewRedactor([]string{"MY_TOKEN=tok-123456789"}, nil)
	var lines []string
	res, err := proc.Run(context.Background(), proc.Cmd{
		Args:   []string{"sh", "-c", "echo value=tok-123456789; echo tok-123456789 >&2"},
		OnLine: func(l string) { lines = append(lines, l) }, Redactor: r,
	})
	require.NoError(t, err)
	for _, s := range append(lines, res.Stdout, res.Stderr, res.Output) {
		require.NotContains(t, s, "tok-123456789")
	}
	require.Equal(t, "value=[REDACTED]\n", res.Stdout)
}

func TestRedactorFind(t *testing.T) {
	t.Parallel()
	r := proc.NewRedactor([]string{"A_KEY=alpha-secret-1", "B_KEY=beta-secret-2", "PATH=/bin"}, []string{"PATH"})
	require.Equal(t, []string{"B_KEY"}, r.Find([]byte("x beta-secret-2 y /bin")))
	require.Empty(t, r.Find([]byte("nothing here")))
}

// Credentials keeps the secrets that are credentials by name or value, and
// the provider keys; the other values the sandbox removes are left alone.
func TestRedactorCredentials(t *testing.T) {
	t.Parallel()
	env := []string{"GITHUB_TOKEN=ghp_0123456789abcdef", "DB_PASSWORD=hunter2hunter2", "DATABASE_URL=postgres://app:s3cretpw@db/app",
		"DEBIAN_FRONTEND=noninteractive", "NODE_ENV=production", "PWD=/home/runner/work", "SERVICE_URL=https://example.com/api"}
	r := proc.NewRedactor(env, nil, "sk-ant-provider-key").Credentials()
	in := "ghp_0123456789abcdef hunter2hunter2 postgres://app:s3cretpw@db/app noninteractive production https://example.com/api sk-ant-provider-key"
	require.Equal(t, "[REDACTED] [REDACTED] [REDACTED] noninteractive production https://example.com/api [REDACTED]", r.Redact(in))
	require.Equal(t, "x", (*proc.Redactor)(nil).Credentials().Redact("x"))
}
