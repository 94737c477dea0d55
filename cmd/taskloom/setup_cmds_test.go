package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskloom/taskloom/config"
	"github.com/taskloom/taskloom/graph"
	"github.com/taskloom/taskloom/internal/doctor"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := taskloom(t, args...)
		require.Equal(t, exitOK, code, errOut)
		require.True(t, strings.HasPrefix(out, "taskloom "), out)
		require.Contains(t, out, "(commit ")
		require.Contains(t, out, runtime.Version())
	}
}

// panicWriter panics on its first write, like a bug deep in a command.
type panicWriter struct{}

func (panicWriter) Write([]byte) (int, error) { panic("boom") }

// TestPanicIsOneLine: a panic reaches the user as one line naming a crash
// file, and the file holds the panic and its stack.
func TestPanicIsOneLine(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var stderr bytes.Buffer
	code := Execute(context.Background(), []string{"version"}, strings.NewReader(""), panicWriter{}, &stderr)
	require.Equal(t, exitError, code)
	line := stderr.String()
	require.Equal(t, 1, strings.Count(line, "\n"), "one line: %q", line)
	require.True(t, strings.HasPrefix(line, "taskloom: internal error: boom; crash report: "), line)
	path := strings.TrimSuffix(strings.TrimPrefix(line, "taskloom: internal error: boom; crash report: "), " (please attach it to a bug report)\n")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(data), "panic: boom")
	require.Contains(t, string(data), "goroutine ")
}

// A panic the graph runtime caught in a node, wrapped on its way up, is
// reported as one caught by Execute: one line, the stack in a crash file.
func TestNodePanicIsOneLine(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	stack := []byte("goroutine 7 [running]:\nnodes.(*Pipeline).verify(...)\n")
	err := fmt.Errorf("run R1: %w", &graph.NodeError{Node: "verify_task", Err: &graph.PanicError{Value: "nil map", Stack: stack}})
	var stderr bytes.Buffer
	require.Equal(t, exitError, reportError(err, &stderr, ""))
	line := stderr.String()
	require.Equal(t, 1, strings.Count(line, "\n"), "one line: %q", line)
	prefix := "taskloom: internal error: run R1: node verify_task: panic: nil map; crash report: "
	require.True(t, strings.HasPrefix(line, prefix), line)
	data, rerr := os.ReadFile(strings.TrimSuffix(strings.TrimPrefix(line, prefix), " (please attach it to a bug report)\n"))
	require.NoError(t, rerr)
	require.Contains(t, string(data), "panic: nil map")
	require.Contains(t, string(data), string(stack))
}

// TestGoInstallVersion installs taskloom as the README says, into a temp
// GOBIN, and runs the installed binary's version.
func TestGoInstallVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := t.TempDir()
	cmd := exec.Command("go", "install", "./")
	// A checkout's build is stamped with its commit (this machine's
	// GOFLAGS may turn that off).
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=-buildvcs=true")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(filepath.Join(bin, "taskloom"), "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	if st, err := os.Stat("../../.git"); err == nil && st.IsDir() {
		// A plain clone stamps the commit (a linked worktree does not).
		require.Regexp(t, `^taskloom \S+ \(commit [0-9a-f]{12}(, modified)?\) go`, string(out))
	} else {
		require.Regexp(t, `^taskloom \S+ \(commit \S+\) go`, string(out))
	}
}

func TestInit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	code, out, errOut := taskloom(t, "init", "--repo", dir)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, ".project-config.json")
	data, err := os.ReadFile(filepath.Join(dir, ".project-config.json"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(data, &cfg))
	require.EqualValues(t, 3, cfg["max_attempts"])
	exclude, err := os.ReadFile(filepath.Join(dir, ".git", "info", "exclude"))
	require.NoError(t, err)
	require.Contains(t, string(exclude), ".taskloom/")

	// It never overwrites.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".project-config.json"), []byte(`{"max_attempts": 9}`), 0o644))
	code, _, errOut = taskloom(t, "init", "--repo", dir)
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, "exists already")
	require.Equal(t, "taskloom: "+filepath.Join(dir, ".project-config.json")+" exists already; edit it, or delete it to start over\n", errOut)

	// Outside a git repo: one line, nothing written.
	other := t.TempDir()
	code, _, errOut = taskloom(t, "init", "--repo", other)
	require.Equal(t, exitError, code)
	require.Contains(t, errOut, "is not inside a git repository")
	require.NoFileExists(t, filepath.Join(other, ".project-config.json"))
}

func TestConfigCommand(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".project-config.json"), []byte(`{"max_attempts": 4, "database": {"url": "postgres://u:hunter2pw@db/x"}}`), 0o644))
	t.Setenv("TASKLOOM_PARALLEL_WORKERS", "3")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-config-test-secret")
	t.Setenv("OPENAI_API_KEY", "")
	code, out, errOut := taskloom(t, "config", "--repo", dir, "--json", "--model", "scripted:x.json")
	require.Equal(t, exitOK, code, errOut)
	require.NotContains(t, out, "sk-ant-config-test-secret")
	require.NotContains(t, out, "hunter2pw")
	var rep struct {
		Values  map[string]any    `json:"values"`
		Sources map[string]string `json:"sources"`
		Secrets map[string]string `json:"secrets"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.EqualValues(t, 4, rep.Values["max_attempts"])
	require.EqualValues(t, 3, rep.Values["parallel_workers"])
	require.Equal(t, "file", rep.Sources["max_attempts"])
	require.Equal(t, "env", rep.Sources["parallel_workers"])
	require.Equal(t, "flag", rep.Sources["model"])
	require.Equal(t, "default", rep.Sources["verify.timeout"])
	require.Equal(t, "set", rep.Secrets["ANTHROPIC_API_KEY"])
	require.Equal(t, "unset", rep.Secrets["OPENAI_API_KEY"])

	code, out, errOut = taskloom(t, "config", "--repo", dir)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "max_attempts = 4  (file)")
	require.Contains(t, out, "ANTHROPIC_API_KEY: set")
	require.NotContains(t, out, "sk-ant-config-test-secret")
	require.NoDirExists(t, filepath.Join(dir, ".taskloom"), "config only reads")
}

// init writes the test command of the project the repo holds, one that
// runs on this machine, and doctor fails a Go test command in a project of
// another kind, where every task would fail before a test ran.
func TestInitAndDoctorFollowTheProject(t *testing.T) {
	t.Parallel()
	session := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(session, []byte(`{"conversations": [{"match": "x", "replies": [{"content": "x"}]}]}`), 0o644))
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pyproject.toml"), []byte("[project]\nname = \"calc\"\n"), 0o644))
	git(t, dir, "add", "pyproject.toml")
	git(t, dir, "commit", "-q", "-m", "first")
	// The pytest this machine has: python3's module, or the one on the
	// PATH (Debian's python3-pytest beside another python3).
	pytest := "python3 -m pytest -q"
	if !doctor.RunnerWorks(t.Context(), dir, strings.Fields(pytest)) && doctor.RunnerWorks(t.Context(), dir, []string{"pytest", "-q"}) {
		pytest = "pytest -q"
	}

	// The defaults' go test ./... cannot run here.
	code, out, _ := taskloom(t, "doctor", "--repo", dir, "--model", "scripted:"+session)
	require.Equal(t, exitError, code, out)
	require.Contains(t, out, "FAIL verify   verify.command runs go, but this repo, a python project (pyproject.toml), has no go.mod: set it to "+pytest+"\n")

	code, out, errOut := taskloom(t, "init", "--repo", dir)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "this repo is a python project (pyproject.toml): verify.command is "+pytest+"\n")
	cfg, err := config.Load(config.LoadOpts{RepoDir: dir})
	require.NoError(t, err)
	require.Equal(t, strings.Fields(pytest), cfg.Verify.Command)
	require.Empty(t, cfg.BuildVerification.Command, "the tests are the build check")
	_, out, _ = taskloom(t, "doctor", "--repo", dir, "--model", "scripted:"+session)
	require.NotContains(t, out, "runs go")
	if doctor.RunnerWorks(t.Context(), dir, strings.Fields(pytest)) {
		require.Contains(t, out, "ok   verify   "+pytest+"\n")
	} else {
		require.Contains(t, out, "FAIL verify", "no pytest on this machine at all")
	}
}

// doctor fails the test runners init writes where they cannot run: an npm
// project without a test script, a python3 that lacks pytest, and go at
// the top of a monorepo whose module is in a folder.
func TestDoctorChecksTheRunner(t *testing.T) {
	t.Parallel()
	session := filepath.Join(t.TempDir(), "s.json")
	require.NoError(t, os.WriteFile(session, []byte(`{"conversations": [{"match": "x", "replies": [{"content": "x"}]}]}`), 0o644))
	repo := func(files map[string]string, cfg string) string {
		dir := t.TempDir()
		git(t, dir, "init", "-q", "-b", "main")
		for name, body := range files {
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, ".project-config.json"), []byte(cfg), 0o644))
		git(t, dir, "add", "-A")
		git(t, dir, "commit", "-q", "-m", "first")
		return dir
	}
	doctorOut := func(dir string) string {
		_, out, _ := taskloom(t, "doctor", "--repo", dir, "--model", "scripted:"+session)
		return out
	}
	npm := `{"verify": {"command": ["npm", "test"]}, "build_verification": {"command": []}}`
	out := doctorOut(repo(map[string]string{"package.json": `{"name": "x", "scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}`}, npm))
	require.Contains(t, out, "FAIL verify   npm test: package.json has no test script: add one (jest, vitest, node --test…), or set verify.command\n")
	out = doctorOut(repo(map[string]string{"package.json": `{"name": "x", "scripts": {"test": "node --test"}}`}, npm))
	require.Contains(t, out, "ok   verify   npm test\n")

	fake := filepath.Join(t.TempDir(), "python-without-pytest")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho 'No module named pytest' >&2\nexit 1\n"), 0o755))
	out = doctorOut(repo(map[string]string{"setup.py": ""}, `{"verify": {"command": ["`+fake+`", "-m", "pytest"]}, "build_verification": {"command": []}}`))
	require.Contains(t, out, "FAIL verify   "+fake+" -m pytest: "+fake+" cannot import pytest: install pytest for it (apt install python3-pytest, or pip install pytest), or set verify.command\n")

	out = doctorOut(repo(map[string]string{"backend/go.mod": "module x\n", "frontend/package.json": "{}"}, `{}`))
	require.Contains(t, out, "FAIL verify   verify.command runs go at the repo's top, which has no go.mod (backend/go.mod is in a folder): set verify.command to run it there")
}
