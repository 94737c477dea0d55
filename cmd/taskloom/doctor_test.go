package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDoctor(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "")
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "first")

	// The default model needs its key: a run cannot start.
	code, out, errOut := taskloom(t, "doctor", "--repo", dir)
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "FAIL model")
	require.Contains(t, out, "ANTHROPIC_API_KEY")
	require.Contains(t, out, "ok   branch   main")
	require.Contains(t, errOut, "check(s) failed")
	require.NoDirExists(t, filepath.Join(dir, ".taskloom"), "doctor only reads")

	// A key bound for plain http to another machine: run refuses it at
	// its start, and so does doctor.
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-doctor-test")
	t.Setenv("ANTHROPIC_BASE_URL", "http://10.255.255.1:8080")
	code, out, _ = taskloom(t, "doctor", "--repo", dir)
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "FAIL model")
	require.Contains(t, out, "refusing to send an API key over plain http to 10.255.255.1:8080")
	require.NotContains(t, out, "sk-ant-doctor-test")
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_BASE_URL", "")

	// With a scripted model it can, and it says what the sandbox enforces.
	session := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(session, []byte(`{"conversations": [{"match": "x", "replies": [{"content": "x"}]}]}`), 0o644))
	code, out, errOut = taskloom(t, "doctor", "--repo", dir, "--model", "scripted:"+session)
	require.Equal(t, exitOK, code, out+errOut)
	require.Contains(t, out, "sandbox")
	require.Contains(t, out, "a run can start")

	// A branch with no commit yet: a run could not start there.
	empty := t.TempDir()
	git(t, empty, "init", "-q", "-b", "main")
	code, out, _ = taskloom(t, "doctor", "--repo", empty, "--model", "scripted:"+session)
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "FAIL branch   main has no commit yet")
	require.NotContains(t, out, "a run can start")

	// A script that is not there, or does not parse, fails the model.
	code, out, _ = taskloom(t, "doctor", "--repo", dir, "--model", "scripted:"+filepath.Join(dir, "missing.json"))
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "FAIL model")
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte("{bad"), 0o644))
	code, out, _ = taskloom(t, "doctor", "--repo", dir, "--model", "scripted:"+bad)
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "decode script")

	// A machine without Landlock is a warning, not a failure.
	t.Setenv("TASKLOOM_SANDBOX_DISABLE", "landlock")
	code, out, _ = taskloom(t, "doctor", "--repo", dir, "--model", "scripted:"+session)
	require.Equal(t, exitOK, code, out)
	require.Contains(t, out, "warn sandbox")
	require.Contains(t, out, "NOT enforced: writes confined to the worktree")

	// A build command that is not installed fails the check, as a verify
	// command would, before a run integrates anything.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".project-config.json"),
		[]byte(`{"verify": {"command": ["true"]}, "build_verification": {"command": ["golangci-lint-missing", "run"]}}`), 0o644))
	code, out, _ = taskloom(t, "doctor", "--repo", dir, "--model", "scripted:"+session)
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "ok   verify")
	require.Contains(t, out, "FAIL build")
	require.Contains(t, out, "golangci-lint-missing is not found in the sandbox's PATH: install it, or set build_verification.command")
	require.NoError(t, os.Remove(filepath.Join(dir, ".project-config.json")))

	// A --db it cannot use fails the config; the store is not then
	// reported as the default SQLite file, which the user did not ask for.
	code, out, _ = taskloom(t, "doctor", "--repo", dir, "--model", "scripted:"+session, "--db", "host=localhost user=postgres")
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "FAIL config")
	require.NotContains(t, out, "SQLite")
	require.Contains(t, out, "not checked until the config loads")

	// Outside a git repo it says so in one line, and fails.
	code, out, _ = taskloom(t, "doctor", "--repo", t.TempDir(), "--model", "scripted:"+session)
	require.Equal(t, exitError, code)
	require.Contains(t, out, "is not inside a git repository")
}
